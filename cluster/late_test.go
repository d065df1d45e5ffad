package cluster_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/cluster"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/proctest"
)

// envLate makes the test binary, as a host agent, put the pool's sets in
// its workers' windows that late (a duration).
const envLate = "POOLRUN_TEST_LATE"

func init() {
	if d, err := time.ParseDuration(os.Getenv(envLate)); err == nil {
		cluster.SetLateWindows(d)
	}
}

// lateBuilds counts the builds of lateItem in this process.
var lateBuilds atomic.Int64

var lateItem = cachepool.Define("cluster_test.lateitem", func(ctx context.Context) ([]byte, error) {
	lateBuilds.Add(1)
	return make([]byte, 1<<10), nil
})

// lateReport is what a job of useLate saw in its worker.
type lateReport struct {
	PID    int
	Had    bool  // the item was resident when the job started
	Builds int64 // the builds of the item in the worker, after the job got it
}

var useLate = engine.Register("cluster_test.uselate", func(ctx context.Context, _ struct{}) (lateReport, error) {
	had := cachepool.FromContext(ctx).Has(lateItem.Key())
	if _, err := lateItem.Get(ctx); err != nil {
		return lateReport{}, err
	}
	return lateReport{PID: os.Getpid(), Had: had, Builds: lateBuilds.Load()}, nil
})

// TestLateWindow: a window whose updates reach an agent's worker late
// never makes it evict an item that a job it runs still needs. Job A needs
// item X; once A has ended, the pool publishes a set without X (no job
// needs X then), and then, for job C, queued after that, a set with X
// again, and sends C. The agent puts each set in the worker's window late
// (its jobs are not delayed): the worker, which holds X from A, may see
// the set without X when C comes; evicting on it would make C find X gone
// and build it again. A worker waits a second for a job's set: 300 ms
// late, it sees C's set in time and C finds X; 1.5 s and 3 s late, it
// does not, so it must keep everything, and say so; C finds X.
func TestLateWindow(t *testing.T) {
	t.Parallel()
	for _, late := range []time.Duration{300 * time.Millisecond, 1500 * time.Millisecond, 3 * time.Second} {
		t.Run(late.String(), func(t *testing.T) { testLateWindow(t, late) })
	}
}

func testLateWindow(t *testing.T, late time.Duration) {
	joinFile := filepath.Join(t.TempDir(), "run.join")
	l, err := listen("", joinFile)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envJoin+"="+joinFile, envLate+"="+late.String())
	var stderr proctest.Buffer // the agent's; its worker's goes to the pool's
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("the agent: %v\n%s", err, stderr.String())
			}
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Errorf("the agent had not exited 20 s after the pool ended")
		}
	}()

	var workerErr proctest.Buffer
	p := engine.New(engine.RemoteOnly(time.Minute), l.Option(), engine.WorkerOutput(os.Stdout, &workerErr))
	a := engine.Queue(p, useLate, struct{}{}, engine.Needs(lateItem))
	var c *engine.Job[lateReport]
	p.Go(func(ctx context.Context) error {
		if err := poll(ctx, "A to run", func() bool { return a.Status() == engine.Running }); err != nil {
			return err
		}
		before := p.Stats().Publishes // the worker's window lists X
		<-a.Done()
		// The set without X is published before C is queued.
		if err := poll(ctx, "the set without X", func() bool { return p.Stats().Publishes != before }); err != nil {
			return err
		}
		c = engine.Queue(p, useLate, struct{}{}, engine.Needs(lateItem))
		return nil
	})
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	ra, err := a.Result()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := c.Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("A: %+v; C: %+v; the pool published %d sets", ra, rc, p.Stats().Publishes)
	if ra.PID != rc.PID || ra.PID == os.Getpid() || ra.PID == cmd.Process.Pid {
		t.Fatalf("A ran in %d, C in %d; want both in the agent's one worker (the agent is %d)", ra.PID, rc.PID, cmd.Process.Pid)
	}
	if !rc.Had || rc.Builds != 1 {
		t.Errorf("C found X resident: %v, builds of X in the worker: %d; want true, 1: the worker evicted X on a stale set", rc.Had, rc.Builds)
	}
	if s := stderr.String() + workerErr.String(); s != "" {
		t.Logf("the agent and its worker said:\n%s", s)
	}
	behind := strings.Contains(workerErr.String(), "the window did not reach the job's generation in time")
	switch {
	case late < time.Second/2 && behind:
		t.Errorf("with a window %v late the worker gave up waiting for it:\n%s", late, workerErr.String())
	case late > time.Second/2 && !behind:
		t.Errorf("with a window %v late the worker did not say, on the pool's stderr, that it could not see the job's set:\n%s", late, workerErr.String())
	}
}
