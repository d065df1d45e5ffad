package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
)

// crashLoopDeaths is how many workers in a row die without having run a
// job before the pool starts no more (the engine's crashLoopLimit).
const crashLoopDeaths = 5

// countDeaths returns an option that counts the pool's WorkerDied events
// in n.
func countDeaths(n *atomic.Int32) engine.Option {
	return engine.OnEvent(func(e engine.Event) {
		if e.Kind == engine.WorkerDied {
			n.Add(1)
		}
	})
}

// TestCrashLoopBeforeHandshake: once a pool's worker serves, new workers
// start for a job queued later and die at start, before the handshake.
// After five in a row the pool starts no more: Run's error wraps
// ErrCrashLoop, quotes what the last one printed and asks about
// engine.Init; but the jobs still run, on the worker that serves.
func TestCrashLoopBeforeHandshake(t *testing.T) {
	dir := t.TempDir()
	dieFile, gate := filepath.Join(dir, "die"), filepath.Join(dir, "gate")
	t.Setenv(envDieAtStart, dieFile)
	var deaths atomic.Int32
	p := engine.New(engine.Workers(2), countDeaths(&deaths), engine.WorkerOutput(io.Discard, io.Discard))
	first := engine.Queue(p, waitFile, gate)
	var second *engine.Job[struct{}]
	p.Go(func(ctx context.Context) error {
		defer openGate(t, gate)
		if err := waitFor(time.Minute, "the first job did not run within a minute", func() bool { return first.Status() == engine.Running }); err != nil {
			return err
		}
		// From now on workers fail at start; the second job wants one.
		openGate(t, dieFile)
		second = engine.Queue(p, nap, time.Millisecond)
		return waitFor(30*time.Second, "the workers started for the second job did not die five times within 30 s", func() bool {
			return deaths.Load() >= crashLoopDeaths
		})
	})
	err := p.Run(context.Background())
	if !errors.Is(err, engine.ErrCrashLoop) {
		t.Fatalf("Run: %v; want an error wrapping ErrCrashLoop", err)
	}
	for _, want := range []string{"5 workers in a row died before they finished a job", "before the handshake", "it last printed: " + dieAtStartLine, "engine.Init", "the pool goes on"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Run's error does not say %q:\n%v", want, err)
		}
	}
	for _, j := range []*engine.Job[struct{}]{first, second} {
		if j == nil || j.Status() != engine.Succeeded {
			t.Errorf("job %v: want it succeeded on the worker that serves", jobState(j))
		}
	}
	if n := deaths.Load(); n != crashLoopDeaths {
		t.Errorf("%d workers died, want %d: none is started after the crash loop", n, crashLoopDeaths)
	}
	t.Logf("Run: %v", err)
}

// TestCrashLoopAfterHandshake: workers that answer the handshake, then die
// while they have no job (one after the other, signalled by the test), are
// a crash loop too after five in a row; Run's error quotes what the last
// one printed, and does not send the reader to engine.Init, since they had
// started. The job that runs on the other worker is not touched.
func TestCrashLoopAfterHandshake(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	t.Setenv(envDieOnUSR1, "1")
	var deaths atomic.Int32
	p := engine.New(engine.Workers(2), countDeaths(&deaths), engine.WorkerOutput(io.Discard, io.Discard))
	long := engine.Queue(p, waitFile, gate)
	short := engine.Queue(p, nap, time.Millisecond)
	p.Go(func(ctx context.Context) error {
		defer openGate(t, gate)
		if err := waitFor(time.Minute, "the jobs did not run within a minute", func() bool {
			return long.Status() == engine.Running && short.Status() == engine.Succeeded
		}); err != nil {
			return err
		}
		// The worker that ran the short job is idle: signal it, then each
		// worker that takes its place once it has answered the handshake.
		// The first had finished a job, so that it does not count; the
		// five after it do.
		signalled := map[int]bool{}
		return waitFor(30*time.Second, "six workers did not die within 30 s", func() bool {
			for _, w := range p.Stats().Workers {
				if w.Index != long.Worker() && w.Live && !signalled[w.PID] {
					signalled[w.PID] = true
					if err := syscall.Kill(w.PID, syscall.SIGUSR1); err != nil {
						t.Errorf("signalling worker %d: %v", w.PID, err)
					}
				}
			}
			return deaths.Load() >= 1+crashLoopDeaths || long.Status().Done()
		})
	})
	err := p.Run(context.Background())
	if !errors.Is(err, engine.ErrCrashLoop) {
		t.Fatalf("Run: %v; want an error wrapping ErrCrashLoop", err)
	}
	for _, want := range []string{"5 workers in a row died before they finished a job", "after the handshake", "exited with status 4", "it last printed: " + dieOnUSR1Line, "the pool goes on"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Run's error does not say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "engine.Init") {
		t.Errorf("Run's error sends the reader to engine.Init, but the workers had answered the handshake:\n%v", err)
	}
	if long.Status() != engine.Succeeded {
		t.Errorf("the job on the other worker: %v; want it succeeded", jobState(long))
	}
	t.Logf("Run: %v", err)
}

// TestJobsThatKillWorkers: jobs that end their workers one after the
// other are Aborted, each on a new worker, and are no crash loop: the
// pool does not give up, and the job queued after them runs.
func TestJobsThatKillWorkers(t *testing.T) {
	p := engine.New(engine.Workers(1), engine.WorkerOutput(io.Discard, io.Discard))
	var killers []*engine.Job[struct{}]
	for range crashLoopDeaths + 1 {
		killers = append(killers, engine.Queue(p, exitWorker, struct{}{}))
	}
	fine := engine.Queue(p, nap, time.Millisecond)
	err := p.Run(context.Background())
	if errors.Is(err, engine.ErrCrashLoop) || !errors.Is(err, engine.ErrWorkerDied) {
		t.Errorf("Run: %v; want the jobs' ErrWorkerDied, and no crash loop", err)
	}
	for _, j := range killers {
		if j.Status() != engine.Aborted {
			t.Errorf("job %v: want it aborted", jobState(j))
		}
	}
	if fine.Status() != engine.Succeeded {
		t.Errorf("the job after them: %v; want it succeeded", jobState(fine))
	}
	if r := p.Stats().Total().Restarts; r != len(killers) {
		t.Errorf("%d restarts, want %d: one for each worker a job ended", r, len(killers))
	}
}

// jobState describes j for a test's message.
func jobState(j *engine.Job[struct{}]) string {
	if j == nil {
		return "never queued"
	}
	_, err := j.Result()
	return fmt.Sprintf("%d %v (%v)", j.ID(), j.Status(), err)
}
