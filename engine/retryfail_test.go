package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
)

// flakyArg says which test's counter a flaky job counts its runs in, and
// how many runs fail before one succeeds.
type flakyArg struct {
	Test  string
	Fails int32
}

var flakyRuns sync.Map // test name -> *atomic.Int32

// flaky fails its first a.Fails runs (in-process workers).
var flaky = engine.Register("engine_test.flaky", func(ctx context.Context, a flakyArg) (int32, error) {
	v, _ := flakyRuns.LoadOrStore(a.Test, new(atomic.Int32))
	n := v.(*atomic.Int32).Add(1)
	if n <= a.Fails {
		return n, fmt.Errorf("run %d fails", n)
	}
	return n, nil
})

func TestRetryFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fails   int32
		retries int
		ok      bool
	}{
		{"passes on the third run", 2, 2, true},
		{"fails after three runs", 5, 2, false},
		{"no retry left", 1, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Cleanup(func() { flakyRuns.Delete(t.Name()) })
			var requeued atomic.Int32
			p := engine.New(engine.InProcess(1), engine.OnEvent(func(e engine.Event) {
				if e.Kind == engine.JobStatus && e.Old == engine.Running && e.New == engine.Queued && e.Err != nil {
					requeued.Add(1)
				}
			}))
			j := engine.Queue(p, flaky, flakyArg{Test: t.Name(), Fails: tc.fails},
				engine.JobRetries(tc.retries), engine.RetryFailures(time.Millisecond))
			err := p.Run(context.Background())
			if (err == nil) != tc.ok {
				t.Fatalf("Run: %v; want ok=%v", err, tc.ok)
			}
			as := j.Attempts()
			if len(as) != tc.retries+1 {
				t.Fatalf("%d attempts, want %d: %+v", len(as), tc.retries+1, as)
			}
			for i, a := range as[:len(as)-1] {
				if a.Status != engine.Failed || a.Err == nil || !strings.Contains(a.Err.Error(), fmt.Sprintf("run %d fails", i+1)) {
					t.Errorf("attempt %d: %v, %v; want Failed, run %d fails", i+1, a.Status, a.Err, i+1)
				}
			}
			if got := requeued.Load(); int(got) != tc.retries {
				t.Errorf("%d events Running -> Queued, want %d", got, tc.retries)
			}
			last := as[len(as)-1]
			if tc.ok != (last.Status == engine.Succeeded) {
				t.Errorf("last attempt %v (%v)", last.Status, last.Err)
			}
		})
	}
}

// Without RetryFailures, a failed run is not retried whatever JobRetries
// says; fail-fast stops the retries of a job waiting for its delay.
func TestRetryFailuresNotWithout(t *testing.T) {
	t.Cleanup(func() { flakyRuns.Delete(t.Name()) })
	p := engine.New(engine.InProcess(1))
	j := engine.Queue(p, flaky, flakyArg{Test: t.Name(), Fails: 1}, engine.JobRetries(3))
	if err := p.Run(context.Background()); err == nil {
		t.Fatal("Run succeeded: the failed run was retried")
	}
	if n := len(j.Attempts()); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

func TestRetryFailuresFailFast(t *testing.T) {
	name := t.Name()
	t.Cleanup(func() { flakyRuns.Delete(name); flakyRuns.Delete(name + "/other") })
	// The retried job waits a long delay after its first run; a job
	// queued then fails for good, and fail-fast cancels the first rather
	// than retry it.
	var p *engine.Pool
	var once sync.Once
	p = engine.New(engine.InProcess(2), engine.FailFast(), engine.OnEvent(func(e engine.Event) {
		if e.Kind == engine.JobStatus && e.JobID == 1 && e.New == engine.Queued && e.Old == engine.Running {
			once.Do(func() { engine.Queue(p, flaky, flakyArg{Test: name + "/other", Fails: 1}) })
		}
	}))
	retried := engine.Queue(p, flaky, flakyArg{Test: name, Fails: 10}, engine.JobRetries(5), engine.RetryFailures(time.Hour))
	if err := p.Run(context.Background()); err == nil {
		t.Fatal("Run succeeded")
	}
	if st := retried.Status(); st != engine.Cancelled {
		t.Errorf("retried job %v, want Cancelled", st)
	}
	if _, err := retried.Result(); !errors.Is(err, engine.ErrFailFast) {
		t.Errorf("retried job's error %v, want fail-fast", err)
	}
	if n := len(retried.Attempts()); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

// blockUntilDone fails when its context ends: a run cut off by the end of
// the pool's context.
var blockUntilDone = engine.Register("engine_test.blockUntilDone", func(ctx context.Context, _ struct{}) (struct{}, error) {
	<-ctx.Done()
	return struct{}{}, errors.New("interrupted")
})

// A run that fails because the pool's context ended is not retried.
func TestRetryFailuresNotOnInterrupt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := engine.New(engine.InProcess(1), engine.OnEvent(func(e engine.Event) {
		if e.Kind == engine.JobStarted {
			cancel()
		}
	}))
	j := engine.Queue(p, blockUntilDone, struct{}{}, engine.JobRetries(3), engine.RetryFailures(0))
	if err := p.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	if n := len(j.Attempts()); n != 1 {
		t.Errorf("%d attempts, want 1: %+v", n, j.Attempts())
	}
	if st := j.Status(); st == engine.Succeeded || st == engine.Queued || st == engine.Running {
		t.Errorf("job %v", st)
	}
}

// RetryFailures runs a job that failed again: here one that fails twice
// succeeds on its third run, each run an Attempt.
func ExampleRetryFailures() {
	p := engine.New(engine.InProcess(1))
	j := engine.Queue(p, flaky, flakyArg{Test: "ExampleRetryFailures", Fails: 2},
		engine.JobRetries(3), engine.RetryFailures(10*time.Millisecond))
	defer flakyRuns.Delete("ExampleRetryFailures")
	if err := p.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range j.Attempts() {
		fmt.Println(a.Status, a.Err)
	}
	n, _ := j.Result()
	fmt.Println("succeeded on run", n)
	// Output:
	// failed run 1 fails
	// failed run 2 fails
	// succeeded <nil>
	// succeeded on run 3
}

// attempted fails until its run's JobAttempt reaches a, and returns the
// attempt numbers it saw, as it can tell them in a worker process: the
// attempt is all it knows.
var attempted = engine.Register("engine_test.attempted", func(ctx context.Context, a int) (int, error) {
	if n := engine.JobAttempt(ctx); n < a {
		return n, fmt.Errorf("attempt %d fails", n)
	}
	return engine.JobAttempt(ctx), nil
})

// A job's context says which run it is, in worker processes (the attempt
// crosses the wire), in-process workers and serial mode; outside a job it
// says 0.
func TestJobAttempt(t *testing.T) {
	if n := engine.JobAttempt(context.Background()); n != 0 {
		t.Errorf("JobAttempt outside a job = %d, want 0", n)
	}
	for _, tc := range []struct {
		name string
		opt  engine.Option
	}{
		{"processes", engine.Workers(1)},
		{"in process", engine.InProcess(1)},
		{"serial", engine.Workers(0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := engine.New(tc.opt)
			j := engine.Queue(p, attempted, 3, engine.JobRetries(2), engine.RetryFailures(time.Millisecond))
			if err := p.Run(context.Background()); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got, _ := j.Result(); got != 3 {
				t.Errorf("last run saw attempt %d, want 3", got)
			}
			for i, a := range j.Attempts()[:2] {
				if want := fmt.Sprintf("attempt %d fails", i+1); a.Err == nil || !strings.Contains(a.Err.Error(), want) {
					t.Errorf("run %d: %v, want %q", i+1, a.Err, want)
				}
			}
		})
	}
}
