package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
)

// overflowItems are more items than the window of TestOverflow has slots.
var overflowItems = func() []*cachepool.Item[*blob] {
	var its []*cachepool.Item[*blob]
	for i := range 12 {
		its = append(its, defineBlob(fmt.Sprintf("test.O%d", i), true))
	}
	return its
}()

// useOverflow gets the overflow items whose numbers it is given.
var useOverflow = engine.Register("test.useoverflow", func(ctx context.Context, which []int) (int, error) {
	for _, i := range which {
		if _, err := overflowItems[i].Get(ctx); err != nil {
			return 0, err
		}
	}
	return len(which), nil
}, engine.Uses())

// residentOverflow counts the overflow items its worker holds.
var residentOverflow = engine.Register("test.residentoverflow", func(ctx context.Context, _ struct{}) (int, error) {
	n := 0
	for _, it := range overflowItems {
		if cachepool.FromContext(ctx).Has(it.Key()) {
			n++
		}
	}
	return n, nil
}, engine.Uses())

// TestOverflow: a pool whose unfinished jobs need more distinct items than
// the window has slots completes correctly, builds each item at most once
// per worker, says when a window overflows and when it fits again, and
// evicts as usual once it fits.
func TestOverflow(t *testing.T) {
	modes(t, func(t *testing.T, tr transport) {
		logPath := filepath.Join(t.TempDir(), "log")
		t.Setenv(envLog, logPath)
		var mu sync.Mutex
		var events []engine.Event
		p := tr.New(t, engine.WindowCapacity(4), engine.OnEvent(func(e engine.Event) {
			if e.Kind == engine.WindowOverflow || e.Kind == engine.WindowFits {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			}
		}))
		// Phase A: 24 jobs over 12 items, two each; phase B, after them
		// all: jobs that need one of those items, then one that needs none.
		var a []engine.Dep
		var jobs []*engine.Job[int]
		for i := range 24 {
			which := []int{i % 12, (i + 1) % 12}
			j := engine.Queue(p, useOverflow, which, engine.Needs(overflowItems[which[0]], overflowItems[which[1]]))
			a = append(a, j)
			jobs = append(jobs, j)
		}
		var b []engine.Dep
		for range 4 {
			j := engine.Queue(p, useOverflow, []int{0}, engine.Needs(overflowItems[0]), engine.After(a...))
			b = append(b, j)
			jobs = append(jobs, j)
		}
		last := engine.Queue(p, residentOverflow, struct{}{}, engine.After(b...))
		if err := p.Run(context.Background()); err != nil {
			t.Fatalf("Run: %v", err)
		}
		for i, j := range jobs {
			want := 2
			if i >= 24 {
				want = 1
			}
			if v, err := j.Result(); err != nil || v != want {
				t.Errorf("job %d: %d, %v", j.ID(), v, err)
			}
		}
		// Built at most once per worker.
		logs, _ := filepath.Glob(logPath + ".*")
		if len(logs) == 0 {
			t.Fatal("no worker built anything")
		}
		for _, f := range logs {
			data, _ := os.ReadFile(f)
			seen := map[string]bool{}
			for line := range strings.Lines(string(data)) {
				if name, ok := strings.CutPrefix(strings.TrimSpace(line), "build "); ok {
					if seen[name] {
						t.Errorf("%s: %s built twice by one worker", filepath.Base(f), name)
					}
					seen[name] = true
				}
			}
		}
		// Overflowed, then fitted again, for each window.
		state := map[int]engine.EventKind{}
		for _, e := range events {
			if e.Capacity != 4 || (e.Kind == engine.WindowOverflow) != (e.Items > 4) {
				t.Errorf("event %v: %d items, capacity %d", e.Kind, e.Items, e.Capacity)
			}
			if prev, ok := state[e.Worker]; ok && prev == e.Kind || !ok && e.Kind != engine.WindowOverflow {
				t.Errorf("window of worker %d: %v after %v", e.Worker, e.Kind, prev)
			}
			state[e.Worker] = e.Kind
		}
		if len(state) == 0 {
			t.Fatal("no window overflowed")
		}
		for w, k := range state {
			if k != engine.WindowFits {
				t.Errorf("window of worker %d ends %v, want fits", w, k)
			}
		}
		// Evicting again: the last job's worker holds none of the items.
		if n, err := last.Result(); err != nil || n != 0 {
			t.Errorf("last job: its worker holds %d overflow items (%v), want 0", n, err)
		}
		if ev := p.Stats().Total().Evicted; ev == 0 {
			t.Errorf("nothing evicted once the window fitted")
		}
	})
}
