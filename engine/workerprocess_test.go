package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/enginehost"
)

var (
	phaseA = cachepool.Define("engine_test.phase.A", func(context.Context) (int, error) { return 1, nil })
	phaseB = cachepool.Define("engine_test.phase.B", func(context.Context) (int, error) { return 2, nil })

	// usePhase gets the item it is given (A or B) and returns its value.
	usePhase = engine.Register("engine_test.use-phase", func(ctx context.Context, which string) (int, error) {
		it := phaseA
		if which == "B" {
			it = phaseB
		}
		return it.Get(ctx)
	})
)

// mirror is the pool's side of a WorkerProcess's window, as a transport
// that carries sets to another host would make it: each publish goes to
// the worker's window with the next generation.
type mirror struct {
	w enginehost.WorkerProcess

	mu        sync.Mutex
	gen, pubs uint64
}

func (m *mirror) Publish(keys []uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen += 2
	m.pubs++
	over, err := m.w.Publish(keys, m.gen)
	if err != nil {
		panic(err) // generations only grow here
	}
	return over
}

func (m *mirror) Gen() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gen
}

func (m *mirror) Publishes() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pubs
}

func (m *mirror) Close() {}

// TestWorkerProcess: a worker process started apart from the pool, whose
// frames are relayed to the pool as a remote worker's and whose window
// mirrors the pool's sets, runs the pool's jobs and evicts what the
// window no longer lists; it exits with status 0 when the pool stops it.
func TestWorkerProcess(t *testing.T) {
	var wp enginehost.WorkerProcess
	p := engine.New(engine.RemoteOnly(time.Minute), hooks.Joiner(func(ctx context.Context, p enginehost.Pool) {
		var err error
		if wp, err = hooks.StartWorkerProcess(p.WindowCapacity(), nil, nil); err != nil {
			t.Error(err)
			return
		}
		w := enginehost.RemoteWorker{Jobs: wp.Jobs(), Control: wp.Control(), Replies: wp.Replies(), Window: &mirror{w: wp}, Host: "agent"}
		if err := p.Admit(w); err != nil {
			t.Error(err)
		}
	}))
	var as, bs []*engine.Job[int]
	for range 20 {
		as = append(as, engine.Queue(p, usePhase, "A", engine.Needs(phaseA)))
	}
	deps := make([]engine.Dep, len(as))
	for i, j := range as {
		deps[i] = j
	}
	for range 20 {
		bs = append(bs, engine.Queue(p, usePhase, "B", engine.Needs(phaseB), engine.After(deps...)))
	}
	if err := p.Run(context.Background()); err != nil || wp == nil {
		t.Fatal(err)
	}
	for i, j := range append(as, bs...) {
		want := 1
		if i >= len(as) {
			want = 2
		}
		if v, err := j.Result(); err != nil || v != want {
			t.Errorf("job %d: %d, %v", j.ID(), v, err)
		}
	}
	w := p.Stats().Workers[0]
	if w.PID != wp.PID() || w.Host != "agent" {
		t.Errorf("the worker's figures: pid %d, host %q; want %d, agent", w.PID, w.Host, wp.PID())
	}
	// A is built once, evicted when the window stops listing it (before
	// the first B job runs), B built once.
	if w.Cache.Builds != 2 || w.Evicted < 1 {
		t.Errorf("the worker built %d items and evicted %d; want 2 builds and A evicted", w.Cache.Builds, w.Evicted)
	}
	done := make(chan error, 1)
	go func() { done <- wp.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the worker process: %v, want it to exit with status 0", err)
		}
	case <-time.After(time.Minute):
		wp.Terminate(0)
		t.Fatal("the worker process had not exited a minute after the pool stopped it")
	}
	if err := wp.Wait(); err == nil {
		t.Error("a second Wait returned nil")
	}
}
