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
	// cleanedBy is 1 + the number of eviction calls that the evicting
	// goroutine had completed when the value's cleanup ran, or 0. When it
	// is at most the number a Get saw completed as it started, the cleanup
	// ran before that Get started.
	cleanedBy atomic.Int64
}

// raceItemBytes is the size of item i in TestConcurrentGetEvict.
func raceItemBytes(i int) int64 { return int64(i+1) * 100 }

// TestConcurrentGetEvict runs many goroutines that Get a few items while one
// goroutine evicts random subsets in a loop (and, in one case, every build
// first evicts to a budget), and checks that:
//   - each build's cleanup runs exactly once (after a final Clear);
//   - no cleanup runs while the same item is being built, and no build
//     while it is being cleaned up;
//   - no Get that started after an eviction returned gets a value that
//     eviction cleaned up;
//   - Version changes with every eviction that evicts, Resident stays
//     sorted and sized, and the statistics add up.
//
// Run it under -race.
func TestConcurrentGetEvict(t *testing.T) {
	const nItems = 4
	var total int64 // the bytes of all items
	for i := range nItems {
		total += raceItemBytes(i)
	}
	tests := []struct {
		name string
		// evict evicts once; keep keeps a random subset of the items.
		evict func(c *cachepool.Cache, r *rand.Rand, keep func(uint64) bool) []uint64
		// budget > 0 makes every build first evict down to budget minus
		// its item's last size, as a worker held to a budget does.
		budget int64
	}{
		{
			name:  "Evict",
			evict: func(c *cachepool.Cache, _ *rand.Rand, keep func(uint64) bool) []uint64 { return c.Evict(keep) },
		},
		{
			name: "EvictLRU",
			evict: func(c *cachepool.Cache, r *rand.Rand, keep func(uint64) bool) []uint64 {
				return c.EvictLRU(r.Int64N(total), keep)
			},
		},
		{
			name: "EvictLRU, and builds evict to a budget",
			evict: func(c *cachepool.Cache, r *rand.Rand, keep func(uint64) bool) []uint64 {
				return c.EvictLRU(r.Int64N(total), keep)
			},
			budget: total / 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			testConcurrentGetEvict(t, nItems, tt.evict, tt.budget)
		})
	}
}

func testConcurrentGetEvict(t *testing.T, nItems int, evict func(*cachepool.Cache, *rand.Rand, func(uint64) bool) []uint64, budget int64) {
	const (
		getters  = 8
		getsEach = 5000 // Gets per getter
		maxSleep = 20 * time.Microsecond
	)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)

	var (
		mu        sync.Mutex
		values    []*raceValue
		building  = make([]atomic.Int32, nItems)
		cleaning  = make([]atomic.Int32, nItems)
		overlaps  atomic.Int32 // build and cleanup of one item at once
		completed atomic.Int64 // eviction calls of the evicting goroutine that have returned
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
			v.cleanedBy.Store(completed.Load() + 1)
			time.Sleep(time.Duration(rand.Int64N(int64(maxSleep))))
		}), cachepool.Size(func(v *raceValue) int64 { return raceItemBytes(v.item) }))
	}
	itemOf := func(k uint64) int {
		for i, it := range items {
			if it.Key() == k {
				return i
			}
		}
		t.Errorf("unknown key %x", k)
		return 0
	}
	ctx, c := newCtx(t)

	var hookEvicted atomic.Int64 // keys evicted by the builds' before-build function
	if budget > 0 {
		c.SetBeforeBuild(func(key uint64, lastBytes int64) {
			if want := raceItemBytes(itemOf(key)); lastBytes != 0 && lastBytes != want {
				t.Errorf("before build: lastBytes %d, want 0 or %d", lastBytes, want)
			}
			hookEvicted.Add(int64(len(c.EvictLRU(budget-lastBytes, nil))))
		})
	}

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
	var res []cachepool.Resident
	for alive.Load() > 0 {
		runtime.Gosched()
		rounds++
		mask := r.Uint32()
		version := c.Version()
		got := evict(c, r, func(k uint64) bool { return mask&(1<<itemOf(k)) != 0 })
		completed.Add(1)
		evicted += len(got)
		for _, k := range got {
			if mask&(1<<itemOf(k)) != 0 {
				t.Errorf("evicted item %d, which keep kept", itemOf(k))
			}
		}
		if len(got) > 0 && c.Version() == version {
			t.Errorf("Version stayed %d over an eviction of %d items", version, len(got))
		}
		res = c.Resident(res[:0])
		for i, x := range res {
			if i > 0 && x.Key <= res[i-1].Key || x.Bytes != raceItemBytes(itemOf(x.Key)) || x.LastUse == 0 {
				t.Errorf("Resident %+v: not sorted by key, or wrong sizes", res)
				break
			}
		}
	}
	wg.Wait()
	evicted += len(c.Clear()) + int(hookEvicted.Load())

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
	t.Logf("%d Gets, %d eviction calls, %d builds, %d evictions (%d by builds)",
		gets.Load(), rounds, len(values), evicted, hookEvicted.Load())
	if len(values) < 2*nItems {
		t.Logf("few builds: the goroutines hardly interleaved on this run")
	}
}
