package engine

import (
	"context"
	"slices"
	"testing"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/shm"
)

var checkC = cachepool.Define("engine.check.C", func(context.Context) (int, error) { return 3, nil })

// TestRunnerCheck follows a worker's checks before jobs, step by step:
// what the window stops listing goes, an item built since the last check
// is judged even when nothing was published, a check that finds nothing
// new evicts nothing, and every build and eviction is noted once.
func TestRunnerCheck(t *testing.T) {
	win, err := shm.Create(0)
	if err != nil {
		t.Fatal(err)
	}
	defer win.Close()
	cache := cachepool.New()
	cache.SetJournal(true)
	defer cache.Clear()
	ctx := cachepool.WithCache(context.Background(), cache)
	r := &runner{win: shmReader{win}, cache: cache, policy: EvictStale}
	a, b, c := policyA, policyB, checkC
	steps := []struct {
		name     string
		publish  []uint64 // nil: nothing published
		build    []*cachepool.Item[int]
		evicted  int
		resident []uint64
		notes    int
	}{
		{"first", []uint64{a.Key(), b.Key()}, []*cachepool.Item[int]{a, b}, 0, []uint64{a.Key(), b.Key()}, 2},
		{"unchanged", nil, nil, 0, []uint64{a.Key(), b.Key()}, 0},
		{"published", []uint64{b.Key()}, nil, 1, []uint64{b.Key()}, 1},
		{"built, unpublished", nil, []*cachepool.Item[int]{c}, 1, []uint64{b.Key()}, 2},
		{"unchanged again", nil, nil, 0, []uint64{b.Key()}, 0},
		{"listed again", []uint64{a.Key(), b.Key()}, []*cachepool.Item[int]{a}, 0, []uint64{a.Key(), b.Key()}, 1},
	}
	gen := uint64(0)
	for _, s := range steps {
		if s.publish != nil {
			if gen, err = win.Publish(s.publish); err != nil {
				t.Fatal(err)
			}
		}
		for _, it := range s.build {
			if _, err := it.Get(ctx); err != nil {
				t.Fatal(err)
			}
		}
		n, err := r.check(gen)
		if n != s.evicted || err != nil {
			t.Errorf("%s: check = %d, %v; want %d, nil", s.name, n, err, s.evicted)
		}
		var resident []uint64
		for _, it := range cache.Resident(nil) {
			resident = append(resident, it.Key)
		}
		slices.Sort(resident)
		want := slices.Sorted(slices.Values(s.resident))
		if !slices.Equal(resident, want) {
			t.Errorf("%s: resident %x, want %x", s.name, resident, want)
		}
		if notes := r.itemNotes(); len(notes) != s.notes {
			t.Errorf("%s: %d notes, want %d", s.name, len(notes), s.notes)
		}
	}
}
