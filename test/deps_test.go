package test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
)

// span is what a stamping job records: when it started and ended, by the
// clock of the process that ran it (all processes share the host's clock).
type span struct {
	Start, End int64
	PID        int
}

var stamp = engine.Register("test.stamp", func(ctx context.Context, sleep time.Duration) (span, error) {
	s := span{Start: time.Now().UnixNano(), PID: os.Getpid()}
	select {
	case <-time.After(sleep):
	case <-ctx.Done():
		return s, ctx.Err()
	}
	s.End = time.Now().UnixNano()
	return s, nil
})

var fail = engine.Register("test.fail", func(ctx context.Context, msg string) (struct{}, error) {
	return struct{}{}, errors.New(msg)
})

// touch creates the file at path: proof that the job ran.
var touch = engine.Register("test.touch", func(ctx context.Context, path string) (struct{}, error) {
	return struct{}{}, os.WriteFile(path, nil, 0o600)
})

func TestDependencyOrder(t *testing.T) {
	modes(t, func(t *testing.T, tr transport) {
		p := tr.New(t)
		a := engine.Queue(p, stamp, 30*time.Millisecond)
		b := engine.Queue(p, stamp, 20*time.Millisecond)
		c := engine.Queue(p, stamp, 0, engine.After(a, b))
		d := engine.Queue(p, stamp, 10*time.Millisecond, engine.After(c))
		if err := p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		res := map[string]span{}
		for name, j := range map[string]*engine.Job[span]{"a": a, "b": b, "c": c, "d": d} {
			s, err := j.Result()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			res[name] = s
		}
		for _, e := range [][2]string{{"a", "c"}, {"b", "c"}, {"c", "d"}} {
			dep, dependent := res[e[0]], res[e[1]]
			if dependent.Start < dep.End {
				t.Errorf("%s started %v before its dependency %s ended", e[1], time.Duration(dep.End-dependent.Start), e[0])
			}
		}
	})
}

func TestDependencyFailure(t *testing.T) {
	modes(t, func(t *testing.T, tr transport) {
		p := tr.New(t)
		dir := t.TempDir()
		bad := engine.Queue(p, fail, "broken input")
		dep := engine.Queue(p, touch, filepath.Join(dir, "dep"), engine.After(bad))
		depdep := engine.Queue(p, touch, filepath.Join(dir, "depdep"), engine.After(dep))
		indep := engine.Queue(p, square, 3)
		err := p.Run(context.Background())
		var je *engine.JobError
		if !errors.As(err, &je) || je.JobID != bad.ID() {
			t.Fatalf("Run() = %v, want the failure of job %d", err, bad.ID())
		}
		if strings.Count(err.Error(), "job ") != 1 {
			t.Errorf("Run() lists cancelled dependents too: %v", err)
		}
		for _, j := range []*engine.Job[struct{}]{dep, depdep} {
			if j.Status() != engine.Cancelled {
				t.Errorf("dependent job %d: %v, want cancelled", j.ID(), j.Status())
			}
			_, err := j.Result()
			if !errors.Is(err, engine.ErrDependencyFailed) {
				t.Errorf("dependent job %d: error %v, want ErrDependencyFailed", j.ID(), err)
			}
		}
		if _, err := dep.Result(); !strings.Contains(err.Error(), "job 1 (test.fail) failed") {
			t.Errorf("error does not name the dependency: %v", err)
		}
		if _, err := depdep.Result(); !strings.Contains(err.Error(), "job 2 (test.touch) cancelled") {
			t.Errorf("error does not name the dependency: %v", err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("cancelled jobs ran: %v", entries)
		}
		if v, err := indep.Result(); err != nil || v != 9 {
			t.Errorf("independent job: %d, %v", v, err)
		}
	})
}

func TestCancel(t *testing.T) {
	modes(t, func(t *testing.T, tr transport) {
		dir := t.TempDir()
		p := tr.New(t)
		long := engine.Queue(p, stamp, time.Minute)
		queued := engine.Queue(p, touch, filepath.Join(dir, "queued"))
		after := engine.Queue(p, touch, filepath.Join(dir, "after"), engine.After(queued))
		if err := queued.Cancel("not wanted"); err != nil {
			t.Fatalf("Cancel before Run: %v", err)
		}
		var runningErr, againErr error
		p.Go(func(ctx context.Context) error {
			if err := poll(ctx, "the long job to run", func() bool { return long.Status() == engine.Running }); err != nil {
				return err
			}
			runningErr = long.Cancel("no longer wanted")
			againErr = long.Cancel("twice")
			return nil
		})
		start := time.Now()
		if err := p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("Run took %v: the running job was not cancelled", took)
		}
		if runningErr != nil {
			t.Errorf("Cancel of a running job: %v", runningErr)
		}
		if !errors.Is(againErr, engine.ErrNotCancellable) {
			t.Errorf("second Cancel of a running job: %v, want ErrNotCancellable", againErr)
		}
		if err := long.Cancel("finished"); !errors.Is(err, engine.ErrNotCancellable) {
			t.Errorf("Cancel of a finished job: %v, want ErrNotCancellable", err)
		}
		// stamp returns when its context ends: the job returned, and ended
		// Cancelled with the reason given.
		_, lerr := long.Result()
		var lce *engine.CancelledError
		if long.Status() != engine.Cancelled || !errors.As(lerr, &lce) || lce.Reason != "no longer wanted" {
			t.Errorf("long job: %v, %v", long.Status(), lerr)
		}
		if a := long.Attempts(); len(a) != 1 || a[0].Status != engine.Cancelled || a[0].Worker < 1 {
			t.Errorf("long job's attempts: %+v", a)
		}
		if r := p.Stats().Total().Restarts; r != 0 {
			t.Errorf("%d restarts: a job that returns when cancelled costs no worker", r)
		}
		_, err := queued.Result()
		var ce *engine.CancelledError
		if queued.Status() != engine.Cancelled || !errors.As(err, &ce) || ce.Reason != "not wanted" {
			t.Errorf("cancelled job: %v, %v", queued.Status(), err)
		}
		if _, err := after.Result(); !errors.Is(err, engine.ErrDependencyFailed) {
			t.Errorf("dependent of the cancelled job: %v", err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("cancelled jobs ran: %v", entries)
		}
	})
}

func TestFailFast(t *testing.T) {
	modes(t, func(t *testing.T, tr transport) {
		dir := t.TempDir()
		p := tr.New(t, engine.FailFast())
		bad := engine.Queue(p, fail, "first failure")
		var rest []*engine.Job[struct{}]
		for i := range 50 {
			// After a slow job, so that none of them can start before the
			// failure is known.
			slow := engine.Queue(p, stamp, 50*time.Millisecond)
			rest = append(rest, engine.Queue(p, touch, filepath.Join(dir, string(rune('a'+i%26))+strings.Repeat("x", i/26)), engine.After(slow)))
		}
		err := p.Run(context.Background())
		var je *engine.JobError
		if !errors.As(err, &je) || je.JobID != bad.ID() {
			t.Fatalf("Run() = %v, want the first failure", err)
		}
		for _, j := range rest {
			if j.Status() != engine.Cancelled {
				t.Fatalf("job %d after the failure: %v, want cancelled", j.ID(), j.Status())
			}
			if _, err := j.Result(); !errors.Is(err, engine.ErrFailFast) && !errors.Is(err, engine.ErrDependencyFailed) {
				t.Errorf("job %d: %v, want ErrFailFast", j.ID(), err)
			}
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%d jobs ran after the failure", len(entries))
		}
	})
}

// TestQueueWhileStopping: a job that a scheduler queues once the pool has
// begun to stop (here: its context ended) is cancelled with ErrPoolClosed,
// not left pending for ever.
func TestQueueWhileStopping(t *testing.T) {
	stopping := make(chan struct{})
	var once sync.Once
	p := engine.New(engine.Workers(0), engine.OnEvent(func(e engine.Event) {
		if e.Kind == engine.PoolChanged && e.Pool == engine.PoolStopping {
			once.Do(func() { close(stopping) })
		}
	}))
	ctx, cancel := context.WithCancel(context.Background())
	var late *engine.Job[int]
	p.Go(func(ctx context.Context) error {
		cancel()
		<-ctx.Done()
		select {
		case <-stopping:
		case <-time.After(10 * time.Second):
			return errors.New("the pool did not stop within 10 s")
		}
		late = engine.Queue(p, square, 2)
		return nil
	})
	if err := p.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	if st := late.Status(); st != engine.Cancelled {
		t.Fatalf("a job queued while the pool stopped is %v, want Cancelled", st)
	}
	if _, err := late.Result(); !errors.Is(err, engine.ErrPoolClosed) {
		t.Errorf("a job queued while the pool stopped: %v, want ErrPoolClosed", err)
	}
}

func TestQueueAfterRun(t *testing.T) {
	p := engine.New(engine.Workers(0))
	engine.Queue(p, square, 1)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	j := engine.Queue(p, square, 2)
	if _, err := j.Result(); !errors.Is(err, engine.ErrPoolClosed) || j.Status() != engine.Cancelled {
		t.Errorf("job queued after Run: %v, %v; want cancelled with ErrPoolClosed", j.Status(), err)
	}
	// A second Run is misuse, answered like all misuse: a panic.
	defer func() {
		if v := recover(); v == nil || !strings.HasPrefix(fmt.Sprint(v), "engine: Pool.Run called more than once") {
			t.Errorf("second Run: recovered %v, want a panic", v)
		}
	}()
	p.Run(context.Background())
	t.Error("second Run returned")
}

func TestTwoPools(t *testing.T) {
	for i := range 2 {
		p := engine.New(engine.Workers(2))
		j := engine.Queue(p, square, i+5)
		if err := p.Run(context.Background()); err != nil {
			t.Fatalf("pool %d: %v", i, err)
		}
		if v, _ := j.Result(); v != (i+5)*(i+5) {
			t.Errorf("pool %d: %d", i, v)
		}
	}
}

func TestScheduler(t *testing.T) {
	modes(t, func(t *testing.T, tr transport) {
		p := tr.New(t)
		var jobs []*engine.Job[int]
		p.Go(func(ctx context.Context) error {
			first := engine.Queue(p, square, 2)
			// Wait for a result, then queue more: jobs added while the
			// pool runs.
			<-first.Done()
			v, err := first.Result()
			if err != nil {
				return err
			}
			for i := range 10 {
				jobs = append(jobs, engine.Queue(p, square, v+i))
			}
			return nil
		})
		p.Go(func(ctx context.Context) error { return errors.New("cannot read the plan") })
		err := p.Run(context.Background())
		var je *engine.JobError
		if !errors.As(err, &je) || je.Func != "scheduler" || !strings.Contains(err.Error(), "cannot read the plan") {
			t.Fatalf("Run() = %v, want the scheduler's error", err)
		}
		if len(jobs) != 10 {
			t.Fatalf("scheduler queued %d jobs", len(jobs))
		}
		for i, j := range jobs {
			if v, err := j.Result(); err != nil || v != (4+i)*(4+i) {
				t.Errorf("job %d: %d, %v", j.ID(), v, err)
			}
		}
	})
}

// TestSkip: a job queued with Skip does not run, ends Skipped once its
// dependencies have succeeded, and its dependents run as after a success;
// a skipped job after a failure is Cancelled like any other.
func TestSkip(t *testing.T) {
	modes(t, func(t *testing.T, tr transport) {
		dir := t.TempDir()
		p := tr.New(t)
		first := engine.Queue(p, touch, filepath.Join(dir, "first"))
		skipped := engine.Queue(p, touch, filepath.Join(dir, "skipped"), engine.After(first), engine.Skip())
		after := engine.Queue(p, touch, filepath.Join(dir, "after"), engine.After(skipped))
		bad := engine.Queue(p, fail, "no")
		notSkipped := engine.Queue(p, touch, filepath.Join(dir, "never"), engine.After(bad), engine.Skip())
		err := p.Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), "no") {
			t.Fatalf("Run: %v", err)
		}
		if skipped.Status() != engine.Skipped {
			t.Errorf("skipped job: %v", skipped.Status())
		}
		if _, err := skipped.Result(); err != nil {
			t.Errorf("skipped job's result: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "skipped")); err == nil {
			t.Error("the skipped job ran")
		}
		for _, j := range []*engine.Job[struct{}]{first, after} {
			if _, err := j.Result(); err != nil {
				t.Errorf("job %d: %v", j.ID(), err)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "after")); err != nil {
			t.Errorf("the job after the skipped one did not run: %v", err)
		}
		if notSkipped.Status() != engine.Cancelled {
			t.Errorf("a skipped job after a failure: %v, want cancelled", notSkipped.Status())
		}
		if n := p.Stats().Counts[engine.Skipped]; n != 1 {
			t.Errorf("%d skipped in the counts", n)
		}
	})
}
