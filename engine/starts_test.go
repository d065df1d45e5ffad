package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
)

// TestWorkersStartAsNeeded: a pool starts no more worker processes than it
// has jobs to run at once, and more as its graph widens, up to Workers(n).
// The jobs that must run side by side wait for a gate that the test opens
// once they all run, so that the counts do not depend on how fast the
// machine is.
func TestWorkersStartAsNeeded(t *testing.T) {
	for _, tt := range []struct {
		name    string
		workers int
		// queue queues the pool's jobs; before its gate opens, the pool
		// must have started at most before workers.
		queue    func(p *engine.Pool, gate string) (all []*engine.Job[struct{}])
		before   int
		min, max int // worker processes started in all
	}{
		{"one job", 8, func(p *engine.Pool, gate string) []*engine.Job[struct{}] {
			return []*engine.Job[struct{}]{engine.Queue(p, waitFile, gate)}
		}, 1, 1, 1},
		// The root runs alone; its four dependents become ready together
		// when it ends, and take more workers than the one it ran on.
		{"one job then four dependents", 8, func(p *engine.Pool, gate string) []*engine.Job[struct{}] {
			root := engine.Queue(p, waitFile, gate)
			all := []*engine.Job[struct{}]{root}
			for range 4 {
				all = append(all, engine.Queue(p, nap, 300*time.Millisecond, engine.After(root)))
			}
			return all
		}, 1, 2, 4},
		// Five jobs that run side by side, on at most two workers.
		{"bounded", 2, func(p *engine.Pool, gate string) []*engine.Job[struct{}] {
			var all []*engine.Job[struct{}]
			for range 5 {
				all = append(all, engine.Queue(p, waitFile, gate))
			}
			return all
		}, 2, 2, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			gate := filepath.Join(t.TempDir(), "gate")
			p := engine.New(engine.Workers(tt.workers))
			jobs := tt.queue(p, gate)
			var before engine.Stats
			p.Go(func(ctx context.Context) error {
				// Once every job that can run before the gate runs, or
				// has a worker starting for it.
				defer openGate(t, gate)
				err := waitFor(time.Minute, "the first jobs did not run within a minute", func() bool {
					n := 0
					for _, j := range jobs {
						if j.Status() == engine.Running {
							n++
						}
					}
					return n >= min(tt.before, len(jobs))
				})
				before = p.Stats()
				return err
			})
			if err := p.Run(context.Background()); err != nil {
				t.Fatalf("Run: %v", err)
			}
			for _, j := range jobs {
				if _, err := j.Result(); err != nil {
					t.Errorf("job %d: %v", j.ID(), err)
				}
			}
			if n := workerStarts(before); n > tt.before {
				t.Errorf("%d workers started before the gate opened, want at most %d", n, tt.before)
			}
			st := p.Stats()
			if n := workerStarts(st); n < tt.min || n > tt.max {
				t.Errorf("%d workers started in all, want %s", n, span(tt.min, tt.max))
			}
			t.Logf("workers started: %d before the gate, %d in all", workerStarts(before), workerStarts(st))
		})
	}
}

func span(lo, hi int) string {
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d to %d", lo, hi)
}

// TestWorkersStartForQueuedJobs: jobs that a scheduler queues while the
// pool runs get workers as they come: one for the first job, then one
// each for three that must run side by side.
func TestWorkersStartForQueuedJobs(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	p := engine.New(engine.Workers(8))
	var first engine.Stats
	var later []*engine.Job[struct{}]
	p.Go(func(ctx context.Context) error {
		defer openGate(t, gate)
		j := engine.Queue(p, nap, time.Millisecond)
		select {
		case <-j.Done():
		case <-ctx.Done():
			return ctx.Err()
		}
		if _, err := j.Result(); err != nil {
			return err
		}
		first = p.Stats()
		for range 3 {
			later = append(later, engine.Queue(p, waitFile, gate))
		}
		return waitFor(time.Minute, "the three jobs did not all run within a minute", func() bool {
			for _, j := range later {
				if j.Status() != engine.Running {
					return false
				}
			}
			return true
		})
	})
	if err := p.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := workerStarts(first); n != 1 {
		t.Errorf("%d workers started for the first job, want 1", n)
	}
	if n := workerStarts(p.Stats()); n != 3 {
		t.Errorf("%d workers started in all, want 3 (one for each of the jobs that ran side by side)", n)
	}
}
