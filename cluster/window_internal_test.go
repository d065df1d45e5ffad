package cluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/proctest"
)

func bucket(t *testing.T, s *Server, name string) nats.KeyValue {
	t.Helper()
	js, err := connect(t, s).JetStream()
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(&nats.KeyValueConfig{Bucket: name, Storage: nats.MemoryStorage, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// TestWindow: a worker's reader sees every set its publisher publishes,
// at the publisher's generation or later; an overflow reads as one; a
// generation not published is waited for until the deadline, then not
// claimed; an unchanged set is not published again.
func TestWindow(t *testing.T) {
	s, err := Start("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pub := newKVPublisher(bucket(t, s, "w1"), "worker-1", 3)
	js, _ := connect(t, s).JetStream() // the worker's connection
	kv, err := js.KeyValue("w1")
	if err != nil {
		t.Fatal(err)
	}
	r, err := newKVReader(kv, "worker-1")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	for _, set := range [][]uint64{{3, 1, 2}, {9}, {}, {1, 2, 3, 4}, {7, 7, 8}} {
		over := pub.Publish(set)
		if over != (len(set) > 3) {
			t.Errorf("Publish(%v) over = %v", set, over)
		}
		g := pub.Gen()
		if g%2 != 0 {
			t.Errorf("generation %d is odd", g)
		}
		if !r.WaitGen(g, time.Now().Add(5*time.Second)) {
			t.Fatalf("the reader did not see generation %d", g)
		}
		snap, err := r.Snapshot(nil)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Compact(slices.Sorted(slices.Values(set)))
		if over {
			want = nil
		}
		if snap.Overflow != over || !slices.Equal(snap.Keys, want) && len(want)+len(snap.Keys) > 0 {
			t.Errorf("after Publish(%v): snapshot %+v", set, snap)
		}
	}
	n, g := pub.Publishes(), pub.Gen()
	pub.Publish([]uint64{8, 7})
	if pub.Publishes() != n || pub.Gen() != g {
		t.Errorf("an unchanged set was published again")
	}
	start := time.Now()
	if r.WaitGen(g+100, time.Now().Add(300*time.Millisecond)) {
		t.Error("a generation never published was claimed")
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 5*time.Second {
		t.Errorf("WaitGen of a generation never published returned after %v, want about 300 ms", d)
	}
}

// TestWindowLateWatch: when the watch is late (here, stopped), WaitGen
// gets the entry directly and still sees the generation in time.
func TestWindowLateWatch(t *testing.T) {
	s, err := Start("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	kv := bucket(t, s, "late")
	pub := newKVPublisher(kv, "w", 10)
	r, err := newKVReader(kv, "w")
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // the watch brings nothing from now on
	time.Sleep(50 * time.Millisecond)
	pub.Publish([]uint64{5})
	if !r.WaitGen(pub.Gen(), time.Now().Add(2*time.Second)) {
		t.Fatal("the direct get did not bring the generation")
	}
	if snap, _ := r.Snapshot(nil); !slices.Equal(snap.Keys, []uint64{5}) {
		t.Errorf("snapshot %+v, want [5]", snap)
	}
}

// envLateBy, in a worker process of the test binary, sets lateBy: its
// window reaches it that late. (Read here, in package cluster's own test
// files, since lateBy is unexported; TestMain, in pool_test.go, then makes
// the process a worker.)
const envLateBy = "POOLRUN_TEST_LATE_BY"

// envJoinFile is pool_test.go's envJoin: it makes the test binary a
// remote worker of the pool whose join file it names.
const envJoinFile = "POOLRUN_TEST_JOIN"

func init() {
	if d, err := time.ParseDuration(os.Getenv(envLateBy)); err == nil && os.Getenv(envJoinFile) != "" {
		lateBy = d
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

// TestLateWindow: a window whose updates reach a remote worker late never
// makes it evict an item that a job it runs still needs. Job A needs item
// X; once A has ended, the pool publishes a set without X (no job needs X
// then), and then, for job C, queued after that, a set with X again, and
// sends C. The worker, which sees the window lateBy late, holds X from A
// and sees the set without X before the one with X: evicting on it would
// make C find X gone and build it again. The engine waits a second for a
// job's set (half of it for the watch, then a direct get). 300 ms late,
// the worker sees C's set within that second and C finds X. 1.5 s and 3 s
// late, it does not see C's set by then: it must give up, keep everything,
// and say so; C finds X.
//
// The watch takes the entries one after the other, so C's set reaches the
// worker some 2 × lateBy after the set without X was published; C reaches
// it some time after that publication too, and the worker waits a second
// from then. A lateness just over half a second would give up only if C
// reached the worker soon after that publication, which a loaded machine
// need not do; the late cases keep clear of that edge: 1.5 s late leaves
// 2 s for it, 3 s late 5 s.
func TestLateWindow(t *testing.T) {
	for _, late := range []time.Duration{300 * time.Millisecond, 1500 * time.Millisecond, 3 * time.Second} {
		t.Run(late.String(), func(t *testing.T) { testLateWindow(t, late) })
	}
}

func testLateWindow(t *testing.T, late time.Duration) {
	joinFile := filepath.Join(t.TempDir(), "run.join")
	l, err := Listen("", joinFile)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envJoinFile+"="+joinFile, envLateBy+"="+late.String())
	var stderr proctest.Buffer
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
				t.Errorf("the worker: %v\n%s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Errorf("the worker had not exited 10 s after the pool ended")
		}
	}()

	p := engine.New(engine.RemoteOnly(time.Minute), l.Option())
	a := engine.Queue(p, useLate, struct{}{}, engine.Needs(lateItem))
	var c *engine.Job[lateReport]
	p.Go(func(ctx context.Context) error {
		for a.Status() != engine.Running {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
		before := p.Stats().Publishes // the worker's window lists X
		<-a.Done()
		// The set without X is published before C is queued.
		for p.Stats().Publishes == before {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
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
	if ra.PID != cmd.Process.Pid || rc.PID != cmd.Process.Pid {
		t.Fatalf("A ran in %d, C in %d; want both in the remote worker %d", ra.PID, rc.PID, cmd.Process.Pid)
	}
	if !rc.Had || rc.Builds != 1 {
		t.Errorf("C found X resident: %v, builds of X in the worker: %d; want true, 1: the worker evicted X on a stale set", rc.Had, rc.Builds)
	}
	if s := stderr.String(); s != "" {
		t.Logf("the worker said:\n%s", s)
	}
	behind := strings.Contains(stderr.String(), "the window did not reach the job's generation in time")
	switch {
	case late < time.Second/2 && behind:
		t.Errorf("with a window %v late the worker gave up waiting for it:\n%s", late, stderr.String())
	case late > time.Second/2 && !behind:
		t.Errorf("with a window %v late the worker did not say that it could not see the job's set:\n%s", late, stderr.String())
	}
	if n := strings.Count(stderr.String(), "reading the window"); n > 1 {
		t.Errorf("the worker said %d times that it could not read the window, want once:\n%s", n, stderr.String())
	}
}
