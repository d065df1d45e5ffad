package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
)

var (
	learnA = cachepool.Define("cluster_test.learn.A", func(context.Context) (int, error) { return 1, nil })
	learnB = cachepool.Define("cluster_test.learn.B", func(context.Context) (int, error) { return 2, nil })

	// learnUse gets A and B without declaring them.
	learnUse = engine.Register("cluster_test.learn-use", func(ctx context.Context, i int) (int, error) {
		a, err := learnA.Get(ctx)
		if err != nil {
			return 0, err
		}
		b, err := learnB.Get(ctx)
		return i + a + b, err
	})
)

// TestLearnItemsRemote: remote workers behind an agent say what their
// jobs got undeclared, as local ones do: after the first job, each of the
// four workers builds A and B at most once; without learning, every job
// builds both.
func TestLearnItemsRemote(t *testing.T) {
	run := func(opts ...engine.Option) uint64 {
		l, agents := agentPool(t, 2)
		p := engine.New(append(opts, engine.RemoteOnly(time.Minute), l.Option())...)
		first := engine.Queue(p, learnUse, 0)
		var jobs []*engine.Job[int]
		for i := 1; i < 100; i++ {
			jobs = append(jobs, engine.Queue(p, learnUse, i, engine.After(first)))
		}
		if err := p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		for i, j := range jobs {
			if v, err := j.Result(); err != nil || v != i+4 {
				t.Fatalf("job %d: %d, %v; want %d", i+1, v, err, i+4)
			}
		}
		// An agent that has not joined yet (a loaded machine can run every
		// job on the other) leaves at the listener's close, by design.
		l.Close()
		exitZero(t, "agent", agents)
		var builds uint64
		for _, ws := range p.Stats().Workers {
			builds += ws.Cache.Builds
		}
		return builds
	}
	if on := run(); on > 2+2*4 {
		t.Errorf("learning: %d builds, want at most 10 (the first job's 2, then 2 per worker)", on)
	}
	if off := run(engine.LearnItems(false)); off != 200 {
		t.Errorf("without learning: %d builds, want 200", off)
	}
}
