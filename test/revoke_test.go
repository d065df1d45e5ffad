package test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
)

// TestRevokeFromLongJob: jobs of a function that takes a few milliseconds
// are sent one ahead of the job their worker runs, so one of them waits
// behind a job of the same function that turns out to take 2 s; when the
// other worker has nothing left to do, the pool takes that job back from
// the busy worker (Running → Queued, never started) and the idle worker
// runs it, long before the long job ends.
func TestRevokeFromLongJob(t *testing.T) {
	var mu sync.Mutex
	type change struct {
		old, new engine.Status
		worker   int
	}
	changes := map[int][]change{}
	p := engine.New(engine.Workers(2), engine.OnEvent(func(e engine.Event) {
		if e.Kind == engine.JobStatus {
			mu.Lock()
			changes[e.JobID] = append(changes[e.JobID], change{e.Old, e.New, e.Worker})
			mu.Unlock()
		}
	}))
	// Warm-up: the function's mean time becomes a few milliseconds.
	var warm []engine.Dep
	for range 6 {
		warm = append(warm, engine.Queue(p, stamp, 3*time.Millisecond))
	}
	long := engine.Queue(p, stamp, 2*time.Second, engine.After(warm...))
	var short []*engine.Job[span]
	for range 6 {
		short = append(short, engine.Queue(p, stamp, 3*time.Millisecond, engine.After(warm...)))
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	l, _ := long.Result()
	revoked := 0
	for i, j := range short {
		s, err := j.Result()
		if err != nil {
			t.Fatalf("short job %d: %v", i, err)
		}
		if s.PID == l.PID || s.End > l.End {
			t.Errorf("short job %d ran in process %d and ended %v after the long job (process %d)", i, s.PID, time.Duration(s.End-l.End), l.PID)
		}
		mu.Lock()
		cs := changes[j.ID()]
		mu.Unlock()
		back := slices.IndexFunc(cs, func(c change) bool { return c.old == engine.Running && c.new == engine.Queued })
		if back > 0 {
			revoked++
			if cs[back-1].worker == cs[len(cs)-1].worker {
				t.Errorf("short job %d was taken back from worker %d and ran on it again: %v", i, cs[back-1].worker, cs)
			}
		}
		if a := j.Attempts(); len(a) != 1 {
			t.Errorf("short job %d: %d attempts, want 1 (a job taken back never started): %+v", i, len(a), a)
		}
	}
	if revoked != 1 {
		t.Errorf("%d short jobs were taken back, want 1 (the one sent behind the long job)", revoked)
	}
}
