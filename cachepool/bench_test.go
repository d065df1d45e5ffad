package cachepool_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/shm"
)

// benchResident is the one table of sizes the benchmarks share: how many
// items are resident when the eviction check runs.
var benchResident = []int{0, 1, 8, 100, 1000}

// benchWindowKeys is the number of keys in the snapshot the evictions check
// against: a full default window.
const benchWindowKeys = shm.DefaultCapacity

var benchHit = cachepool.Define("cachepool_test/bench/hit", func(context.Context) (*[64]byte, error) {
	return new([64]byte), nil
})

// benchHitOther alternates with benchHit in BenchmarkGetHit/Alternating.
var benchHitOther = cachepool.Define("cachepool_test/bench/hit-other", func(context.Context) (*[64]byte, error) {
	return new([64]byte), nil
})

// benchMembers are the items that fill the cache in BenchmarkEvict.
var benchMembers = cachepool.DefineFamily("cachepool_test/bench/member", func(ctx context.Context, i int) (int, error) {
	return i, nil
})

// benchSized are the items that fill the cache in BenchmarkEvictLRU: one
// byte each.
var benchSized = cachepool.DefineFamily("cachepool_test/bench/sized", func(ctx context.Context, i int) (int, error) {
	return i, nil
}, cachepool.Size(func(int) int64 { return 1 }))

func BenchmarkGetHit(b *testing.B) {
	c := cachepool.New()
	ctx := cachepool.WithCache(context.Background(), c)
	if _, err := benchHit.Get(ctx); err != nil {
		b.Fatal(err)
	}
	b.Run("WithCache", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := benchHit.Get(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Default", func(b *testing.B) {
		ctx := context.Background()
		if _, err := benchHit.Get(ctx); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cachepool.Default().Evict(func(k uint64) bool { return k != benchHit.Key() }) })
		b.ReportAllocs()
		for b.Loop() {
			if _, err := benchHit.Get(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Alternating", func(b *testing.B) {
		// Each Get returns another item than the one before: the use
		// clock advances on every hit. Figures are per Get.
		if _, err := benchHitOther.Get(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := benchHit.Get(ctx); err != nil {
				b.Fatal(err)
			}
			if _, err := benchHitOther.Get(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/Get")
	})
	b.Run("Parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := benchHit.Get(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// fillCache makes n family members resident in a new cache and returns it
// with a snapshot of a window holding their keys and enough other keys to
// make benchWindowKeys. missing members are built but left out of the
// window.
func fillCache(tb testing.TB, n, missing int) (*cachepool.Cache, context.Context, shm.Snapshot) {
	c := cachepool.New()
	ctx := cachepool.WithCache(context.Background(), c)
	var keys []uint64
	for i := range n {
		it := benchMembers.Item(i)
		if _, err := it.Get(ctx); err != nil {
			tb.Fatal(err)
		}
		if i >= missing {
			keys = append(keys, it.Key())
		}
	}
	for i := 0; len(keys) < benchWindowKeys; i++ {
		keys = append(keys, cachepool.Key("not resident")+uint64(i)) // any other keys
	}
	w, err := shm.Create(benchWindowKeys)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { w.Close() })
	if _, err := w.Publish(keys); err != nil {
		tb.Fatal(err)
	}
	snap, err := w.Snapshot(make([]uint64, 0, benchWindowKeys))
	if err != nil {
		tb.Fatal(err)
	}
	if len(snap.Keys) != benchWindowKeys || snap.Overflow {
		tb.Fatalf("snapshot of %d keys (overflow %v), want %d", len(snap.Keys), snap.Overflow, benchWindowKeys)
	}
	return c, ctx, snap
}

// BenchmarkEvict measures the check a worker makes before every job: Evict
// against a snapshot of a full window. Nothing is evicted except in the
// "evict-one" cases, which evict one item and build it again per iteration.
func BenchmarkEvict(b *testing.B) {
	for _, n := range benchResident {
		b.Run("resident="+strconv.Itoa(n), func(b *testing.B) {
			b.Run("keep-all", func(b *testing.B) {
				c, _, snap := fillCache(b, n, 0)
				b.ReportAllocs()
				for b.Loop() {
					if got := c.Evict(snap.Contains); got != nil {
						b.Fatalf("evicted %x", got)
					}
				}
				if n > 0 {
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/item")
				}
			})
			b.Run("Contains-only", func(b *testing.B) {
				// The baseline: the same lookups without the cache.
				c, _, snap := fillCache(b, n, 0)
				keys := residentKeys(c)
				b.ReportAllocs()
				for b.Loop() {
					for _, k := range keys {
						if !snap.Contains(k) {
							b.Fatalf("key %x not in the snapshot", k)
						}
					}
				}
			})
			b.Run("EvictGen-unchanged", func(b *testing.B) {
				c, _, snap := fillCache(b, n, 0)
				c.EvictGen(snap.Gen, snap.Contains)
				b.ReportAllocs()
				for b.Loop() {
					if got := c.EvictGen(snap.Gen, snap.Contains); got != nil {
						b.Fatalf("evicted %x", got)
					}
				}
			})
			if n == 0 {
				return
			}
			b.Run("evict-one", func(b *testing.B) {
				c, ctx, snap := fillCache(b, n, 1)
				first := benchMembers.Item(0)
				c.Evict(snap.Contains)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := first.Get(ctx); err != nil {
						b.Fatal(err)
					}
					if got := c.Evict(snap.Contains); len(got) != 1 {
						b.Fatalf("evicted %x, want one key", got)
					}
				}
			})
		})
	}
}

// BenchmarkEvictLRU measures the eviction a worker held to a memory budget
// makes before a build: EvictLRU over a cache of equally sized items.
// "under-target" finds nothing to do; "keep-all" scans every item and
// keeps it; "evict-one" evicts the least recently used item and builds it
// again per iteration, so that each iteration evicts the next one.
func BenchmarkEvictLRU(b *testing.B) {
	keepAll := func(uint64) bool { return true }
	for _, n := range benchResident {
		if n == 0 {
			continue
		}
		b.Run("resident="+strconv.Itoa(n), func(b *testing.B) {
			fill := func(b *testing.B) (*cachepool.Cache, context.Context) {
				c := cachepool.New()
				ctx := cachepool.WithCache(context.Background(), c)
				for i := range n {
					if _, err := benchSized.Item(i).Get(ctx); err != nil {
						b.Fatal(err)
					}
				}
				return c, ctx
			}
			b.Run("under-target", func(b *testing.B) {
				c, _ := fill(b)
				b.ReportAllocs()
				for b.Loop() {
					if got := c.EvictLRU(int64(n), nil); got != nil {
						b.Fatalf("evicted %x", got)
					}
				}
			})
			b.Run("keep-all", func(b *testing.B) {
				c, _ := fill(b)
				b.ReportAllocs()
				for b.Loop() {
					if got := c.EvictLRU(0, keepAll); got != nil {
						b.Fatalf("evicted %x", got)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/item")
			})
			b.Run("evict-one", func(b *testing.B) {
				c, ctx := fill(b)
				b.ReportAllocs()
				next := 0 // the least recently used item
				for b.Loop() {
					it := benchSized.Item(next)
					if got := c.EvictLRU(int64(n-1), nil); len(got) != 1 || got[0] != it.Key() {
						b.Fatalf("evicted %x, want [%x]", got, it.Key())
					}
					if _, err := it.Get(ctx); err != nil {
						b.Fatal(err)
					}
					next = (next + 1) % n
				}
			})
		})
	}
}

// TestHotPathsDoNotAllocate guards the figures BenchmarkGetHit,
// BenchmarkEvict and BenchmarkEvictLRU report: a hit, an eviction check
// that evicts nothing, Has, Stats, Version and Resident into a slice with
// room allocate nothing.
func TestHotPathsDoNotAllocate(t *testing.T) {
	c, ctx, snap := fillCache(t, 8, 0)
	empty := cachepool.New()
	if _, err := benchHit.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := benchHitOther.Get(ctx); err != nil {
		t.Fatal(err)
	}
	sized := cachepool.New()
	sizedCtx := cachepool.WithCache(context.Background(), sized)
	for i := range 8 {
		if _, err := benchSized.Item(i).Get(sizedCtx); err != nil {
			t.Fatal(err)
		}
	}
	res := make([]cachepool.Resident, 0, 8)
	tests := []struct {
		name string
		f    func()
	}{
		{"Get hit", func() { benchHit.Get(ctx) }},
		{"Get hits of alternating items", func() { benchHit.Get(ctx); benchHitOther.Get(ctx) }},
		{"Get hit, Default cache", func() { benchHit.Get(context.Background()) }},
		{"Evict keeping all", func() { c.Evict(snap.Contains) }},
		{"EvictGen unchanged", func() { c.EvictGen(snap.Gen, snap.Contains) }},
		{"Evict on an empty cache", func() { empty.Evict(snap.Contains) }},
		{"Has", func() { c.Has(benchHit.Key()) }},
		{"Stats", func() { c.Stats() }},
		{"Version", func() { c.Version() }},
		{"Resident into a slice with room", func() { res = sized.Resident(res[:0]) }},
		{"EvictLRU under target", func() { sized.EvictLRU(8, nil) }},
		{"EvictLRU keeping all", func() { sized.EvictLRU(0, func(uint64) bool { return true }) }},
		{"Family.Item of an existing member", func() { benchMembers.Item(3) }},
	}
	if _, err := benchHit.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cachepool.Default().Evict(func(k uint64) bool { return k != benchHit.Key() }) })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if n := testing.AllocsPerRun(1000, tt.f); n != 0 {
				t.Errorf("%v allocations per call, want 0", n)
			}
		})
	}
}
