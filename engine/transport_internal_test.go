package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

var joinSquare = Register("engine.join.square", func(ctx context.Context, x int) (int, error) {
	time.Sleep(time.Millisecond)
	return x * x, nil
})

// joinTransport starts no worker: its workers join by themselves, as a
// transport across hosts would have them. Each is a local worker whose
// link the scheduler first hears of by its hello.
type joinTransport struct {
	lt    *localTransport
	mu    sync.Mutex
	links []link
}

func (t *joinTransport) start(int, windowPublisher) (link, error) {
	return nil, errors.New("workers join by themselves")
}

func (t *joinTransport) newWindow() (windowPublisher, error) { return t.lt.newWindow() }

func (t *joinTransport) close() { t.lt.close() }

// join starts a worker that the scheduler first hears of by its hello,
// which brings the window it reads.
func (t *joinTransport) join() link {
	win, err := t.lt.newWindow()
	if err != nil {
		panic(err)
	}
	l := t.lt.serve(0, t.lt.windows.of(win), win)
	t.mu.Lock()
	t.links = append(t.links, l)
	t.mu.Unlock()
	return l
}

// TestWorkersJoinAndLeave runs a pool through a transport whose workers
// join while it runs: the scheduler gives each a place of its own, sends
// them jobs like any others, and removes the place of one that leaves
// (its running job is Aborted) rather than start another.
func TestWorkersJoinAndLeave(t *testing.T) {
	var tr *joinTransport
	p := New()
	p.cfg.transport = func(capacity int, params workerParams, out chan<- msg) (transport, int) {
		tr = &joinTransport{lt: newLocalTransport(capacity, params, out, workerOutput{})}
		return tr, 0
	}
	var jobs []*Job[int]
	for i := range 300 {
		jobs = append(jobs, Queue(p, joinSquare, i))
	}
	p.Go(func(ctx context.Context) error {
		tr.join()
		if err := pollDone(ctx, jobs[20]); err != nil {
			return err
		}
		tr.join()
		if err := pollDone(ctx, jobs[100]); err != nil {
			return err
		}
		// The first worker leaves.
		tr.mu.Lock()
		first := tr.links[0]
		tr.mu.Unlock()
		first.terminate(0)
		return nil
	})
	err := p.Run(context.Background())
	aborted := 0
	for i, j := range jobs {
		switch v, jerr := j.Result(); {
		case j.Status() == Aborted:
			aborted++
		case jerr != nil || v != i*i:
			t.Errorf("job %d: %d, %v", j.ID(), v, jerr)
		}
	}
	if aborted > 1 || (aborted == 1) != (err != nil) {
		t.Errorf("%d jobs aborted; Run: %v", aborted, err)
	}
	st := p.Stats()
	if len(st.Workers) != 2 {
		t.Fatalf("%d places, want 2: %+v", len(st.Workers), st.Workers)
	}
	if st.Workers[0].Jobs == 0 || st.Workers[1].Jobs == 0 {
		t.Errorf("a joined worker ran no job: %+v", st.Workers)
	}
	if tot := st.Total(); tot.Restarts != 0 || tot.Jobs < 299 {
		t.Errorf("restarts %d, jobs %d; want none restarted, every job run", tot.Restarts, tot.Jobs)
	}
	p.mu.Lock()
	removed := p.sched.places[0].removed
	p.mu.Unlock()
	if !removed {
		t.Error("the place of the worker that left is still in use")
	}
}

// pollDone waits until job has ended, ctx ends, or a minute passes.
func pollDone(ctx context.Context, job *Job[int]) error {
	deadline := time.Now().Add(time.Minute)
	for !job.Status().Done() {
		if time.Now().After(deadline) {
			return errors.New("a job had not ended after a minute")
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}
