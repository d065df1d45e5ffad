package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/shm"
)

// readsWindow maps the window of its worker through JobWindow, as a
// program a job starts would, and reports whether it lists itemSmall.
var readsWindow = engine.Register("engine_test.jobwindow.read", func(ctx context.Context, _ int) (bool, error) {
	f := engine.JobWindow(ctx)
	if f == nil {
		return false, errors.New("JobWindow is nil")
	}
	w, err := shm.Open(f)
	if err != nil {
		return false, err
	}
	defer w.Close()
	s, err := w.Snapshot(nil)
	if err != nil {
		return false, err
	}
	return !s.Overflow && s.Contains(itemSmall.Key()), nil
})

// TestJobWindow checks that a job finds the window of its worker, with
// its items listed, whatever the worker's link.
func TestJobWindow(t *testing.T) {
	if engine.JobWindow(context.Background()) != nil {
		t.Error("JobWindow of a context that is no job's is not nil")
	}
	for _, tc := range []struct {
		name    string
		workers engine.Option
	}{
		{"processes", engine.Workers(1)},
		{"in-process", engine.InProcess(1)},
		{"serial", engine.Workers(0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := engine.New(tc.workers)
			j := engine.Queue(p, readsWindow, 0, engine.Needs(itemSmall))
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if listed, err := j.Result(); err != nil || !listed {
				t.Errorf("the job's window lists its item: %v, %v; want true", listed, err)
			}
		})
	}
}
