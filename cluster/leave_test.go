package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/proctest"
)

// TestWorkerSIGTERM: a remote worker stopped with SIGTERM while it runs a
// job leaves cleanly: it exits with status 0 within a second, the job it
// ran ends Aborted (it is not run again behind the user's back), the jobs
// it had been sent but not started run elsewhere, and the pool goes on.
func TestWorkerSIGTERM(t *testing.T) {
	joinFile := filepath.Join(t.TempDir(), "run.join")
	l, err := listen("", joinFile)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ws := startWorkers(t, joinFile, 2)
	var mu sync.Mutex
	var leftEvents []engine.Event
	p := engine.New(engine.Workers(0), l.Option(), engine.OnEvent(func(e engine.Event) {
		if e.Kind == engine.WorkerDied {
			mu.Lock()
			leftEvents = append(leftEvents, e)
			mu.Unlock()
		}
	}))
	gate, open := newGate(t)
	busy := engine.Queue(p, hold, gate) // the serial worker's
	var jobs []*engine.Job[int]
	for i := range 100 {
		jobs = append(jobs, engine.Queue(p, slowSquare, i))
	}
	var long *engine.Job[struct{}]
	exited := make(chan error, 1)
	var left time.Duration
	p.Go(func(ctx context.Context) error {
		defer open()
		if err := poll(ctx, "the remote workers", func() bool { return busy.Status() == engine.Running && len(p.Stats().Workers) >= 3 }); err != nil {
			return err
		}
		// Running, for the pool, is also sent ahead of another job: wait
		// until the job has started.
		mark := filepath.Join(t.TempDir(), "started")
		long = engine.Queue(p, untilCancelled, waitArg{time.Minute, mark})
		if err := poll(ctx, "the long job to start", func() bool { return fileExists(mark) }); err != nil {
			return err
		}
		// Each agent has one worker: SIGTERM to the agent of the
		// worker that runs the job, as to poolrun worker.
		pid := proctest.ParentOf(p.Stats().Workers[long.Worker()-1].PID)
		w := -1
		for i, c := range ws {
			if c.Process.Pid == pid {
				w = i
			}
		}
		if w < 0 {
			return fmt.Errorf("the job's worker's parent, %d, is none of the agents", pid)
		}
		start := time.Now()
		syscall.Kill(pid, syscall.SIGTERM)
		go func() {
			err := ws[w].Wait()
			left = time.Since(start)
			exited <- err
		}()
		// The serial worker stays busy until the pool has seen the worker
		// leave: with jobs still to run, the pool has not asked it to stop.
		return poll(ctx, "the pool to see the worker leave", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(leftEvents) > 0
		})
	})
	// Run reports the one job that its worker left.
	if err := p.Run(context.Background()); !errors.Is(err, engine.ErrWorkerDied) || strings.Count(err.Error(), "\n") != 0 {
		t.Fatalf("Run: %v; want the error of the job that its worker left, alone", err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the worker stopped with SIGTERM: %v, want status 0", err)
		}
		t.Logf("the worker exited %v after its SIGTERM", left.Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("the worker stopped with SIGTERM had not exited 20 s after the pool's end")
	}
	squaresRight(t, jobs)
	_, err = long.Result()
	t.Logf("the job it ran: %v, %v", long.Status(), err)
	if long.Status() != engine.Aborted || len(long.Attempts()) != 1 || !errors.Is(err, engine.ErrWorkerDied) || !strings.Contains(err.Error(), "left the pool") {
		t.Errorf("the job it ran: %v after %d attempts (%v), want Aborted after 1, with ErrWorkerDied, saying that its worker left", long.Status(), len(long.Attempts()), err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leftEvents) != 1 || !strings.Contains(fmt.Sprint(leftEvents[0].Err), "left the pool") {
		t.Errorf("WorkerDied events %+v, want one that says the worker left", leftEvents)
	}
}

type waitArg struct {
	D    time.Duration
	Mark string // a file made when the job starts
}

// untilCancelled makes the file a.Mark, then waits for a.D or its
// context's end, and returns the context's error if that came first.
var untilCancelled = engine.Register("cluster_test.untilCancelled", func(ctx context.Context, a waitArg) (struct{}, error) {
	os.WriteFile(a.Mark, nil, 0o644)
	select {
	case <-time.After(a.D):
		return struct{}{}, nil
	case <-ctx.Done():
		return struct{}{}, context.Cause(ctx)
	}
})

// TestIdleWorkerSIGTERM: a remote worker that waits for a job when it is
// stopped with SIGTERM leaves at once, with status 0, and the pool goes
// on without it.
func TestIdleWorkerSIGTERM(t *testing.T) {
	joinFile := filepath.Join(t.TempDir(), "run.join")
	l, err := listen("", joinFile)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ws := startWorkers(t, joinFile, 1)
	p := engine.New(engine.Workers(0), l.Option())
	gate, open := newGate(t)
	busy := engine.Queue(p, hold, gate) // the serial worker's, alone
	exited := make(chan error, 1)
	var left time.Duration
	p.Go(func(ctx context.Context) error {
		// The pool ends once the worker has left: it could not stop the
		// worker itself first.
		defer open()
		if err := poll(ctx, "the remote worker", func() bool { return busy.Status() == engine.Running && len(p.Stats().Workers) >= 2 }); err != nil {
			return err
		}
		start := time.Now()
		ws[0].Process.Signal(syscall.SIGTERM)
		go func() { exited <- ws[0].Wait() }()
		select {
		case err := <-exited:
			left = time.Since(start)
			exited <- err
			return nil
		case <-time.After(20 * time.Second):
			return errors.New("the idle worker stopped with SIGTERM had not exited 20 s later")
		}
	})
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Errorf("the idle worker stopped with SIGTERM: %v, want status 0", err)
	}
	t.Logf("the idle worker left %v after its SIGTERM", left.Round(time.Millisecond))
	if w := p.Stats().Workers[1]; w.Jobs != 0 {
		t.Errorf("the remote worker ran %d jobs, want none", w.Jobs)
	}
}

// TestJoinAfterTheEnd: a worker that asks to join a pool whose run has
// ended (its listener not closed yet) leaves with status 0, no error, as
// soon as the listener closes.
func TestJoinAfterTheEnd(t *testing.T) {
	joinFile := filepath.Join(t.TempDir(), "run.join")
	l, srv, err := listenServer("", joinFile)
	if err != nil {
		t.Fatal(err)
	}
	p := engine.New(engine.Workers(0), l.Option())
	engine.Queue(p, slowSquare, 3)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	asked := srv.Messages()
	ws := startWorkers(t, joinFile, 1)
	// It asks, and nobody answers: the server takes its request twice
	// (it asks again when the first finds no responder).
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := poll(ctx, "the worker to ask twice", func() bool { return srv.Messages() >= asked+2 }); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- ws[0].Wait() }()
	closed := time.Now()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the worker: %v, want status 0", err)
		}
		t.Logf("the worker left %v after the listener closed", time.Since(closed).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("the worker was still asking to join 20 s after the pool's end")
	}
}
