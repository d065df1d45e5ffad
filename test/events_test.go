package test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
)

// recorder collects a pool's events.
type recorder struct {
	mu     sync.Mutex
	events []engine.Event
}

func (r *recorder) add(e engine.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// statuses returns, per job id, the statuses it went through, starting with
// the one it was added with.
func (r *recorder) statuses(t *testing.T) map[int][]engine.Status {
	t.Helper()
	seq := map[int][]engine.Status{}
	for _, e := range r.events {
		switch e.Kind {
		case engine.JobAdded:
			if _, dup := seq[e.JobID]; dup {
				t.Errorf("job %d added twice", e.JobID)
			}
			seq[e.JobID] = []engine.Status{e.New}
		case engine.JobStatus:
			s, ok := seq[e.JobID]
			if !ok {
				t.Errorf("status event for job %d before it was added", e.JobID)
				continue
			}
			if last := s[len(s)-1]; e.Old != last {
				t.Errorf("job %d went from %v to %v, but its last status was %v", e.JobID, e.Old, e.New, last)
			}
			seq[e.JobID] = append(s, e.New)
		}
	}
	return seq
}

func TestEvents(t *testing.T) {
	modes(t, func(t *testing.T, tr transport) {
		var rec recorder
		p := tr.New(t, engine.OnEvent(rec.add))
		a := engine.Queue(p, square, 2, engine.Label("step", "a"))
		b := engine.Queue(p, fail, "no", engine.After(a))
		c := engine.Queue(p, square, 3, engine.After(b))
		p.Run(context.Background())

		want := map[int][]engine.Status{
			a.ID(): {engine.Pending, engine.Queued, engine.Running, engine.Succeeded},
			b.ID(): {engine.Pending, engine.Queued, engine.Running, engine.Failed},
			c.ID(): {engine.Pending, engine.Cancelled},
		}
		got := rec.statuses(t)
		for id, w := range want {
			if !slices.Equal(got[id], w) {
				t.Errorf("job %d: statuses %v, want %v", id, got[id], w)
			}
		}
		var pool []engine.PoolState
		for i, e := range rec.events {
			if i > 0 && e.Time.Before(rec.events[i-1].Time) {
				t.Errorf("event %d is earlier than the one before it", i)
			}
			if e.Kind == engine.PoolChanged {
				pool = append(pool, e.Pool)
			}
			if e.JobID == a.ID() && e.Labels["step"] != "a" {
				t.Errorf("event %d of job a lacks its label: %+v", i, e)
			}
			if e.Kind == engine.JobStatus && e.New == engine.Running && e.Worker == 0 {
				t.Errorf("running event without a worker: %+v", e)
			}
		}
		wantPool := []engine.PoolState{engine.PoolStarting, engine.PoolRunning, engine.PoolStopping, engine.PoolClosed}
		if !slices.Equal(pool, wantPool) {
			t.Errorf("pool states %v, want %v", pool, wantPool)
		}
		last := rec.events[len(rec.events)-1]
		if last.Counts[engine.Succeeded] != 1 || last.Counts[engine.Failed] != 1 || last.Counts[engine.Cancelled] != 1 || last.Total() != 3 {
			t.Errorf("final counts %v", last.Counts)
		}
	})
}

func TestTicks(t *testing.T) {
	modes(t, func(t *testing.T, tr transport) { testTicks(t, tr) })
}

func testTicks(t *testing.T, tr transport) {
	var rec recorder
	p := tr.New(t, engine.OnEvent(rec.add), engine.Tick(20*time.Millisecond))
	engine.Queue(p, stamp, 300*time.Millisecond)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	ticks := 0
	var running bool
	for _, e := range rec.events {
		if e.Kind == engine.JobStatus {
			running = e.New == engine.Running
		}
		if e.Kind == engine.TickEvent && running {
			ticks++
		}
	}
	// 300 ms at one tick per 20 ms of silence: about 15; the machine may be
	// slow, so ask for a few.
	if ticks < 3 {
		t.Errorf("%d ticks while a 300 ms job ran, want several", ticks)
	}
	t.Logf("%d ticks", ticks)
}

// nap sleeps for its argument, in milliseconds.
var nap = engine.Register("test.nap", func(ctx context.Context, ms int) (int, error) {
	time.Sleep(time.Duration(ms) * time.Millisecond)
	return ms, nil
})

// TestStarted: every job that ran has one JobStarted event, after its
// Running one (sent), and Job.Started is when it began on its worker: a
// job sent to a worker ahead of the one that worker runs (jobs of less
// than 100 ms are) starts when that one has ended, not when it was sent.
func TestStarted(t *testing.T) {
	modes(t, func(t *testing.T, tr transport) {
		var rec recorder
		p := tr.New(t, engine.OnEvent(rec.add))
		var jobs []*engine.Job[int]
		for range 12 {
			jobs = append(jobs, engine.Queue(p, nap, 20))
		}
		if err := p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		sent := map[int]time.Time{}
		events := map[int]int{}
		for _, e := range rec.events {
			switch {
			case e.Kind == engine.JobStatus && e.New == engine.Running:
				sent[e.JobID] = e.Time
			case e.Kind == engine.JobStarted:
				events[e.JobID]++
				if _, ok := sent[e.JobID]; !ok || e.Worker == 0 || e.Attempt != 1 {
					t.Errorf("JobStarted of job %d (worker %d, attempt %d) before it was sent", e.JobID, e.Worker, e.Attempt)
				}
			}
		}
		waited := 0
		for _, j := range jobs {
			started := j.Started()
			_, began, _ := j.Times() // as the worker measured it
			if events[j.ID()] != 1 {
				t.Errorf("job %d: %d JobStarted events, want 1", j.ID(), events[j.ID()])
			}
			// On one host the clocks agree; a started frame costs a pipe's
			// or the loopback's latency.
			if started.Before(sent[j.ID()]) || started.Before(began.Add(-5*time.Millisecond)) || started.After(began.Add(time.Second)) {
				t.Errorf("job %d: sent %v, began %v (its worker), Started %v", j.ID(), sent[j.ID()], began, started)
			}
			if started.Sub(sent[j.ID()]) >= 10*time.Millisecond {
				waited++
			}
		}
		if waited == 0 {
			t.Error("no job waited at its worker behind another: Started says when a job was sent")
		}
		t.Logf("%d of %d jobs began 10 ms or more after they were sent", waited, len(jobs))
	})
}
