package cachepool_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cachepool"
)

// raceValue is one build of one item in TestConcurrentGetEvict.
type raceValue struct {
	item     int
	cleanups atomic.Int32
	// cleanedBy is the number of the Evict call that cleaned the value up
	// (the first Evict is 1), or 0.
	cleanedBy atomic.Int64
}

// TestConcurrentGetEvict runs many goroutines that Get a few items while one
// goroutine evicts random subsets in a loop, and checks that:
//   - each build's cleanup runs exactly once (after a final Clear);
//   - no cleanup runs while the same item is being built, and no build
//     while it is being cleaned up;
//   - no Get that started after an Evict returned gets a value that Evict
//     cleaned up.
//
// Run it under -race.
func TestConcurrentGetEvict(t *testing.T) {
	const (
		nItems   = 4
		getters  = 8
		getsEach = 5000 // Gets per getter
		maxSleep = 20 * time.Microsecond
	)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)

	var (
		mu        sync.Mutex
		values    []*raceValue
		building  [nItems]atomic.Int32
		cleaning  [nItems]atomic.Int32
		overlaps  atomic.Int32 // build and cleanup of one item at once
		completed atomic.Int64 // Evict calls that have returned
	)
	items := make([]*cachepool.Item[*raceValue], nItems)
	for i := range items {
		items[i] = cachepool.Define(uniqueName(t, "item"), func(ctx context.Context) (*raceValue, error) {
			building[i].Add(1)
			defer building[i].Add(-1)
			if cleaning[i].Load() != 0 {
				overlaps.Add(1)
			}
			v := &raceValue{item: i}
			mu.Lock()
			values = append(values, v)
			mu.Unlock()
			time.Sleep(time.Duration(rand.Int64N(int64(maxSleep)))) // widen the window
			return v, nil
		}, cachepool.Cleanup(func(v *raceValue) {
			cleaning[v.item].Add(1)
			defer cleaning[v.item].Add(-1)
			if building[v.item].Load() != 0 {
				overlaps.Add(1)
			}
			v.cleanups.Add(1)
			v.cleanedBy.Store(completed.Load() + 1) // one evicting goroutine
			time.Sleep(time.Duration(rand.Int64N(int64(maxSleep))))
		}))
	}
	ctx, c := newCtx(t)

	var stale atomic.Int32 // Gets that returned a value cleaned up before they started
	var gets atomic.Int64
	var alive atomic.Int32
	alive.Store(getters)
	var wg sync.WaitGroup
	for g := range getters {
		wg.Go(func() {
			defer alive.Add(-1)
			r := rand.New(rand.NewPCG(seed, uint64(g)))
			for range getsEach {
				runtime.Gosched() // let the evicting goroutine in
				i := r.IntN(nItems)
				before := completed.Load()
				v, err := items[i].Get(ctx)
				if err != nil {
					t.Errorf("Get: %v", err)
					return
				}
				if by := v.cleanedBy.Load(); by != 0 && by <= before {
					stale.Add(1)
				}
				gets.Add(1)
			}
		})
	}

	r := rand.New(rand.NewPCG(seed, 1<<32))
	var evicted, rounds int
	for alive.Load() > 0 {
		runtime.Gosched()
		rounds++
		mask := r.Uint32()
		got := c.Evict(func(k uint64) bool {
			for i, it := range items {
				if it.Key() == k {
					return mask&(1<<i) != 0
				}
			}
			t.Errorf("keep asked about unknown key %x", k)
			return true
		})
		completed.Add(1)
		evicted += len(got)
	}
	wg.Wait()
	evicted += len(c.Clear())

	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d times a build and a cleanup of the same item overlapped", n)
	}
	if n := stale.Load(); n != 0 {
		t.Errorf("%d Gets returned a value cleaned up before they started", n)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, v := range values {
		if n := v.cleanups.Load(); n != 1 {
			t.Errorf("value %d (item %d) cleaned up %d times, want 1", i, v.item, n)
		}
	}
	st := c.Stats()
	if st.Builds != uint64(len(values)) || st.Evictions != uint64(len(values)) || evicted != len(values) || st.Resident != 0 {
		t.Errorf("%d builds, %d evicted keys returned, Stats %+v; want Builds = Evictions = builds, nothing resident",
			len(values), evicted, st)
	}
	if st.Hits+st.Builds != uint64(gets.Load()) {
		t.Errorf("Hits %d + Builds %d != %d Gets: each Get is one or the other", st.Hits, st.Builds, gets.Load())
	}
	t.Logf("%d Gets, %d Evict calls, %d builds, %d evictions", gets.Load(), rounds, len(values), evicted)
	if len(values) < 2*nItems {
		t.Logf("few builds: the goroutines hardly interleaved on this run")
	}
}
