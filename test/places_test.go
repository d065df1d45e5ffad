package test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/enginehost"
	"github.com/poolrun/poolrun/internal/proctest"
)

// TestStatsWhileWorkersComeAndGo reads Pool.Stats from another goroutine
// while workers die and are replaced; run under -race, it must raise no
// report, and the figures must add up.
func TestStatsWhileWorkersComeAndGo(t *testing.T) {
	p := engine.New(engine.Workers(2))
	const kills = 4
	var squares []*engine.Job[int]
	for i := range 200 {
		if i%50 == 25 {
			engine.Queue(p, killSelf, struct{}{})
		}
		squares = append(squares, engine.Queue(p, square, i))
	}
	stop := make(chan struct{})
	var reads int
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			st := p.Stats()
			for _, w := range st.Workers {
				_ = w.PID + w.Jobs + w.Restarts
			}
			reads++
		}
	})
	err := p.Run(context.Background())
	close(stop)
	wg.Wait()
	if !errors.Is(err, engine.ErrWorkerDied) {
		t.Fatalf("Run: %v, want ErrWorkerDied", err)
	}
	for i, j := range squares {
		if v, err := j.Result(); err != nil || v != i*i {
			t.Errorf("job %d: %d, %v", j.ID(), v, err)
		}
	}
	// A worker is started again only while jobs wait for one: the other
	// may have run every job left behind the last kill before the pool
	// saw the death, so the restarts are 1 to kills.
	tot := p.Stats().Total()
	if tot.Restarts < 1 || tot.Restarts > kills || tot.Jobs != 200 {
		t.Errorf("restarts %d, jobs %d; want 1 to %d and 200", tot.Restarts, tot.Jobs, kills)
	}
	t.Logf("%d reads of Stats while the pool ran", reads)
}

// TestHandshakeTimeout: a worker that does not answer its handshake in time
// is killed and reported; the pool goes on with the other worker.
func TestHandshakeTimeout(t *testing.T) {
	t.Setenv(envStallOnce, filepath.Join(t.TempDir(), "stalled"))
	// The timeout leaves a loaded machine time to start the other worker
	// (a race-built test binary that links NATS).
	p := engine.New(engine.Workers(2), hooks.StartTimeout(3*time.Second))
	var jobs []*engine.Job[span]
	for range 40 { // 4 s for the one worker: longer than the timeout
		jobs = append(jobs, engine.Queue(p, stamp, 100*time.Millisecond))
	}
	err := p.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "did not answer the handshake within 3s and was killed") {
		t.Fatalf("Run: %v, want the stalled worker reported", err)
	}
	for _, j := range jobs {
		if _, err := j.Result(); err != nil {
			t.Errorf("job %d: %v", j.ID(), err)
		}
	}
	var pids []int
	for _, w := range p.Stats().Workers {
		pids = append(pids, w.PID)
	}
	if left := proctest.WaitGone(pids, 5*time.Second); len(left) > 0 {
		t.Errorf("workers %v still there after Run", left)
	}
	t.Logf("Run: %v", err)
}

// TestHandshakeTimeoutAll: when no worker answers, Run fails soon with an
// error that says so and names engine.Init, rather than wait.
func TestHandshakeTimeoutAll(t *testing.T) {
	t.Setenv(envStallOnce, filepath.Join(t.TempDir(), "stalled"))
	p := engine.New(engine.Workers(1), hooks.StartTimeout(2*time.Second))
	j := engine.Queue(p, square, 3)
	start := time.Now()
	err := p.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no worker left") || !strings.Contains(err.Error(), "engine.Init") {
		t.Fatalf("Run: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Run took %v", took)
	}
	if j.Status() != engine.Cancelled {
		t.Errorf("the job is %v, want cancelled", j.Status())
	}
	if _, err := os.Stat(os.Getenv(envStallOnce)); err != nil {
		t.Errorf("no worker stalled: %v", err)
	}
}

// TestStalledWorkerAtTheEnd: a pool that finishes before a stalled worker's
// handshake is due does not wait for it: the worker is killed at once.
func TestStalledWorkerAtTheEnd(t *testing.T) {
	t.Setenv(envStallOnce, filepath.Join(t.TempDir(), "stalled"))
	p := engine.New(engine.Workers(2))
	// Two jobs, so that two workers start (a pool starts them as jobs
	// wait): one stalls, the other runs both.
	j := engine.Queue(p, square, 3)
	k := engine.Queue(p, square, 4)
	start := time.Now()
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v, _ := j.Result(); v != 9 {
		t.Errorf("result %d", v)
	}
	if v, _ := k.Result(); v != 16 {
		t.Errorf("result %d", v)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Run took %v: it waited for the stalled worker", took)
	}
}

// TestWorkerStartedByHand: the program started with the worker marker but
// without a pool's descriptors exits with status 2 and one line that says
// what the marker is for; no panic.
func TestWorkerStartedByHand(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), engine.WorkerEnv+"="+strconv.Itoa(enginehost.ProtocolVersion))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit: %v, want status 2; stderr:\n%s", err, stderr.String())
	}
	out := strings.TrimRight(stderr.String(), "\n")
	if strings.Count(out, "\n") != 0 || !strings.Contains(out, "unset "+engine.WorkerEnv) || strings.Contains(out, "panic") {
		t.Errorf("stderr is not one line that says what %s is for:\n%s", engine.WorkerEnv, out)
	}
}

// TestEarlyDeathReplaced: a worker that dies before its handshake is
// replaced like any other, and the pool goes on.
func TestEarlyDeathReplaced(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "died")
	t.Setenv(envDieFirst, marker)
	p := engine.New(engine.Workers(2))
	// Jobs long enough together that the pool still runs when the death
	// is noticed.
	var jobs []*engine.Job[span]
	for range 20 {
		jobs = append(jobs, engine.Queue(p, stamp, 30*time.Millisecond))
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, j := range jobs {
		if v, err := j.Result(); err != nil || v.End == 0 {
			t.Errorf("job %d: %+v, %v", j.ID(), v, err)
		}
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("no worker died: %v", err)
	}
	if r := p.Stats().Total().Restarts; r != 1 {
		t.Errorf("%d restarts, want 1", r)
	}
}

// TestCrashLoop: when every worker dies at start, Run fails within seconds
// with an error that says so, instead of starting workers forever.
func TestCrashLoop(t *testing.T) {
	t.Setenv(envDieAlways, "1")
	p := engine.New(engine.Workers(2))
	j := engine.Queue(p, square, 3)
	start := time.Now()
	err := p.Run(context.Background())
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "workers in a row died before they finished a job") || !strings.Contains(err.Error(), "engine.Init") {
		t.Fatalf("Run: %v", err)
	}
	if !strings.Contains(err.Error(), "it last printed: test worker: failing at start, as asked") {
		t.Errorf("Run's error does not give what the last worker printed: %v", err)
	}
	if took > 10*time.Second {
		t.Errorf("Run took %v", took)
	}
	if j.Status() != engine.Cancelled {
		t.Errorf("the job is %v, want cancelled", j.Status())
	}
	t.Logf("Run failed after %v: %v", took.Round(time.Millisecond), err)
}
