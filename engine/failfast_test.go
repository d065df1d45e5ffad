package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/poolrun/poolrun/engine"
)

// quickRuns counts the runs of quick jobs, for TestFailFastSendsNoneAhead.
var quickRuns atomic.Int32

// quick is a job that takes no time: it fails when fail is true.
var quick = engine.Register("engine_test.quick", func(ctx context.Context, fail bool) (struct{}, error) {
	quickRuns.Add(1)
	if fail {
		return struct{}{}, errors.New("failed, as asked")
	}
	return struct{}{}, nil
})

// TestFailFastSendsNoneAhead: with FailFast, no job starts after the
// failure, even among jobs short enough that a worker is otherwise sent
// the next one ahead of the one it runs (and takes it the moment that one
// ends, before the parent hears of the failure).
func TestFailFastSendsNoneAhead(t *testing.T) {
	for _, mode := range []struct {
		name string
		opt  engine.Option
	}{{"in-process", engine.InProcess(1)}, {"worker process", engine.Workers(1)}} {
		t.Run(mode.name, func(t *testing.T) {
			quickRuns.Store(0)
			p := engine.New(mode.opt, engine.FailFast())
			const before, after = 30, 30
			for range before {
				engine.Queue(p, quick, false)
			}
			bad := engine.Queue(p, quick, true)
			var rest []*engine.Job[struct{}]
			for range after {
				rest = append(rest, engine.Queue(p, quick, false))
			}
			err := p.Run(context.Background())
			var je *engine.JobError
			if !errors.As(err, &je) || je.JobID != bad.ID() {
				t.Fatalf("Run() = %v, want the failure of job %d", err, bad.ID())
			}
			for _, j := range rest {
				if j.Status() != engine.Cancelled {
					t.Errorf("job %d, queued after the failing one on the only worker: %v, want cancelled", j.ID(), j.Status())
				}
			}
			if mode.name == "in-process" {
				if n := quickRuns.Load(); n != before+1 {
					t.Errorf("%d jobs ran, want %d: the ones before the failure and the failing one", n, before+1)
				}
			}
		})
	}
}
