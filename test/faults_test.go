package test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
)

// dieOnce kills its worker with SIGKILL the first time it runs (it
// creates the file at path), and returns "ok" on a later run.
var dieOnce = engine.Register("test.dieonce", func(ctx context.Context, path string) (string, error) {
	if f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
		f.Close()
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Minute)
	}
	return "ok", nil
})

// sleepDeaf sleeps for d whatever its context says, and returns d; in
// this process (serial mode) it says on deafReturned that it has returned.
var sleepDeaf = engine.Register("test.sleepdeaf", func(ctx context.Context, d time.Duration) (time.Duration, error) {
	time.Sleep(d)
	select {
	case deafReturned <- struct{}{}:
	default:
	}
	return d, nil
})

var deafReturned = make(chan struct{}, 16)

// markDeaf creates the file at path, then sleeps for a minute whatever its
// context says.
var markDeaf = engine.Register("test.markdeaf", func(ctx context.Context, path string) (struct{}, error) {
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return struct{}{}, err
	}
	time.Sleep(time.Minute)
	return struct{}{}, nil
})

// statusEvents records the JobStatus events of a pool.
type statusEvents struct {
	mu sync.Mutex
	ev []engine.Event
}

func (s *statusEvents) add(e engine.Event) {
	if e.Kind == engine.JobStatus || e.Kind == engine.WorkerDied {
		s.mu.Lock()
		s.ev = append(s.ev, e)
		s.mu.Unlock()
	}
}

// TestRetries: a job whose worker dies under it runs again on a live
// worker; its attempts and the events show both runs.
func TestRetries(t *testing.T) {
	dir := t.TempDir()
	var ev statusEvents
	p := engine.New(engine.Workers(2), engine.Retries(2), engine.OnEvent(ev.add))
	j := engine.Queue(p, dieOnce, filepath.Join(dir, "died"))
	var others []*engine.Job[int]
	for i := range 20 {
		others = append(others, engine.Queue(p, square, i))
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if v, err := j.Result(); err != nil || v != "ok" {
		t.Fatalf("retried job: %q, %v", v, err)
	}
	for i, o := range others {
		if v, err := o.Result(); err != nil || v != i*i {
			t.Errorf("job %d: %d, %v", o.ID(), v, err)
		}
	}
	a := j.Attempts()
	if len(a) != 2 || a[0].Status != engine.Aborted || !errors.Is(a[0].Err, engine.ErrWorkerDied) ||
		a[1].Status != engine.Succeeded || a[1].Err != nil || a[0].PID == a[1].PID || a[0].PID == 0 {
		t.Fatalf("attempts: %+v", a)
	}
	var back, died bool
	var runs []int
	for _, e := range ev.ev {
		switch {
		case e.Kind == engine.WorkerDied:
			died = died || e.PID == a[0].PID && e.Worker == a[0].Worker && e.Err != nil
		case e.JobID != j.ID():
		case e.Old == engine.Running && e.New == engine.Queued:
			back = e.Attempt == 1 && errors.Is(e.Err, engine.ErrWorkerDied) && e.Worker == a[0].Worker
		case e.New == engine.Running:
			runs = append(runs, e.Attempt)
		}
	}
	if !back || !died || len(runs) != 2 || runs[0] != 1 || runs[1] != 2 {
		t.Errorf("events: back to the queue %v, worker died %v, runs %v: %+v", back, died, runs, ev.ev)
	}
	if r := p.Stats().Total().Restarts; r != 1 {
		t.Errorf("%d restarts, want 1", r)
	}
}

// TestRetriesLimits: JobRetries overrides the pool's; a job that returned
// an error is not retried; a job whose worker always dies is Aborted after
// its retries.
func TestRetriesLimits(t *testing.T) {
	dir := t.TempDir()
	p := engine.New(engine.Workers(2), engine.Retries(3))
	none := engine.Queue(p, dieOnce, filepath.Join(dir, "none"), engine.JobRetries(0))
	failed := engine.Queue(p, fail, "no luck")
	always := engine.Queue(p, killSelf, struct{}{}, engine.JobRetries(1))
	err := p.Run(context.Background())
	if !errors.Is(err, engine.ErrWorkerDied) {
		t.Fatalf("Run: %v", err)
	}
	if none.Status() != engine.Aborted || len(none.Attempts()) != 1 {
		t.Errorf("JobRetries(0): %v after %d attempts, want aborted after 1", none.Status(), len(none.Attempts()))
	}
	if failed.Status() != engine.Failed || len(failed.Attempts()) != 1 {
		t.Errorf("failed job: %v after %d attempts, want failed after 1", failed.Status(), len(failed.Attempts()))
	}
	if a := always.Attempts(); always.Status() != engine.Aborted || len(a) != 2 || a[1].Status != engine.Aborted {
		t.Errorf("always dying: %v after %+v, want aborted after 2 attempts", always.Status(), a)
	}
}

// TestTimeout: a job past its time whose function returns when its
// context ends fails with context.DeadlineExceeded, and costs no worker;
// JobTimeout overrides the pool's Timeout, and 0 there means none.
func TestTimeout(t *testing.T) {
	modes(t, func(t *testing.T, tr transport) {
		p := tr.New(t, engine.Timeout(time.Hour))
		slow := engine.Queue(p, stamp, time.Minute, engine.JobTimeout(200*time.Millisecond))
		free := engine.Queue(p, stamp, 300*time.Millisecond, engine.JobTimeout(0))
		after := engine.Queue(p, square, 4)
		start := time.Now()
		err := p.Run(context.Background())
		if took := time.Since(start); took > 30*time.Second {
			t.Fatalf("Run took %v", took)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Run: %v, want a timeout", err)
		}
		_, serr := slow.Result()
		var te *engine.TimeoutError
		if slow.Status() != engine.Failed || !errors.Is(serr, context.DeadlineExceeded) || !errors.As(serr, &te) || te.Killed || te.Timeout != 200*time.Millisecond {
			t.Errorf("timed-out job: %v, %v", slow.Status(), serr)
		}
		if _, err := free.Result(); err != nil {
			t.Errorf("job without a timeout: %v", err)
		}
		if v, err := after.Result(); err != nil || v != 16 {
			t.Errorf("job after: %d, %v", v, err)
		}
		if r := p.Stats().Total().Restarts; r != 0 {
			t.Errorf("%d restarts, want 0", r)
		}
	})
}

// TestTimeoutKill: a job that ignores its context is failed once its
// time and the grace period are past; its worker is killed and replaced,
// and the pool goes on.
func TestTimeoutKill(t *testing.T) {
	var ev statusEvents
	p := engine.New(engine.Workers(1), engine.Timeout(200*time.Millisecond), hooks.CancelGrace(300*time.Millisecond), engine.OnEvent(ev.add))
	deaf := engine.Queue(p, sleepDeaf, time.Minute)
	next := engine.Queue(p, square, 5)
	start := time.Now()
	err := p.Run(context.Background())
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("Run took %v", took)
	}
	_, derr := deaf.Result()
	var te *engine.TimeoutError
	if deaf.Status() != engine.Failed || !errors.As(derr, &te) || !te.Killed || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deaf job: %v, %v; Run: %v", deaf.Status(), derr, err)
	}
	if v, err := next.Result(); err != nil || v != 25 {
		t.Errorf("next job: %d, %v", v, err)
	}
	if r := p.Stats().Total().Restarts; r != 1 {
		t.Errorf("%d restarts, want 1", r)
	}
	if a := deaf.Attempts(); len(a) != 1 || a[0].Status != engine.Failed {
		t.Errorf("attempts: %+v", a)
	}
}

// TestTimeoutSerial: in serial mode a job that ignores its context cannot
// be killed; it is failed after the grace period and left to return, and
// the pool goes on with a new in-process worker.
func TestTimeoutSerial(t *testing.T) {
	for len(deafReturned) > 0 {
		<-deafReturned // said by an earlier test
	}
	p := engine.New(engine.Workers(0), engine.Timeout(100*time.Millisecond), hooks.CancelGrace(100*time.Millisecond))
	deaf := engine.Queue(p, sleepDeaf, time.Second)
	next := engine.Queue(p, square, 5)
	if err := p.Run(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run: %v", err)
	}
	var te *engine.TimeoutError
	if _, err := deaf.Result(); !errors.As(err, &te) || !te.Killed {
		t.Errorf("deaf job: %v", err)
	}
	if v, err := next.Result(); err != nil || v != 25 {
		t.Errorf("next job: %d, %v", v, err)
	}
	// The abandoned job returns before the test ends.
	select {
	case <-deafReturned:
	case <-time.After(time.Minute):
		t.Error("the abandoned job had not returned a minute later")
	}
}

// TestCancelRunningKill: a running job that ignores its context is
// Cancelled once the grace period after Cancel is past, its worker killed
// and replaced.
func TestCancelRunningKill(t *testing.T) {
	p := engine.New(engine.Workers(1), hooks.CancelGrace(300*time.Millisecond))
	started := filepath.Join(t.TempDir(), "started")
	deaf := engine.Queue(p, markDeaf, started)
	next := engine.Queue(p, square, 6)
	p.Go(func(ctx context.Context) error {
		if err := poll(ctx, "the deaf job to start", func() bool { _, err := os.Stat(started); return err == nil }); err != nil {
			return err
		}
		return deaf.Cancel("stop it")
	})
	if err := p.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var ce *engine.CancelledError
	if _, err := deaf.Result(); deaf.Status() != engine.Cancelled || !errors.As(err, &ce) || ce.Reason != "stop it" {
		t.Errorf("deaf job: %v, %v", deaf.Status(), err)
	}
	if v, err := next.Result(); err != nil || v != 36 {
		t.Errorf("next job: %d, %v", v, err)
	}
	if r := p.Stats().Total().Restarts; r != 1 {
		t.Errorf("%d restarts, want 1", r)
	}
}

// stopSelf stops its own worker process with SIGSTOP, as an operator or a
// debugger might.
var stopSelf = engine.Register("test.stopself", func(ctx context.Context, path string) (string, error) {
	if f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
		f.Close()
		syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		time.Sleep(time.Second) // the signal stops every thread soon, not at once
	}
	return "ok", nil
})

// TestSilentWorker: a worker stopped with SIGSTOP while it runs a job is
// killed after the silence limit; the job is Aborted, and retried.
func TestSilentWorker(t *testing.T) {
	p := engine.New(engine.Workers(1), hooks.SilenceLimit(time.Second), engine.Retries(1))
	j := engine.Queue(p, stopSelf, filepath.Join(t.TempDir(), "stopped"))
	start := time.Now()
	if err := p.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("Run took %v", took)
	}
	a := j.Attempts()
	if len(a) != 2 || a[0].Status != engine.Aborted || !strings.Contains(a[0].Err.Error(), "sent nothing for 1s") || a[1].Status != engine.Succeeded {
		t.Errorf("attempts: %+v", a)
	}
}

// writeHeader writes a plausible frame header, and three bytes, to its
// worker's reply pipe, as a command of a job could through
// /proc/$PPID/fd/5; then it returns.
var writeHeader = engine.Register("test.writeheader", func(ctx context.Context, path string) (string, error) {
	if f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
		f.Close()
		os.NewFile(5, "replies").Write([]byte("\350\003\000\000\004abc"))
	}
	return "ok", nil
})

// TestWedgedReplies: a worker whose reply stream is broken by a stray
// frame header is killed (after the silence limit at most); its job is
// Aborted, and retried.
func TestWedgedReplies(t *testing.T) {
	p := engine.New(engine.Workers(1), hooks.SilenceLimit(time.Second), engine.Retries(1))
	j := engine.Queue(p, writeHeader, filepath.Join(t.TempDir(), "written"))
	start := time.Now()
	if err := p.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("Run took %v", took)
	}
	if a := j.Attempts(); len(a) != 2 || a[0].Status != engine.Aborted || a[1].Status != engine.Succeeded {
		t.Errorf("attempts: %+v", a)
	}
}
