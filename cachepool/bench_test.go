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
var benchResident = []int{0, 1, 8, 1000}

// benchWindowKeys is the number of keys in the snapshot the evictions check
// against: a full default window.
const benchWindowKeys = shm.DefaultCapacity

var benchHit = cachepool.Define("cachepool_test/bench/hit", func(context.Context) (*[64]byte, error) {
	return new([64]byte), nil
})

// benchMembers are the items that fill the cache in BenchmarkEvict.
var benchMembers = cachepool.DefineFamily("cachepool_test/bench/member", func(ctx context.Context, i int) (int, error) {
	return i, nil
})

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
				keys := c.Resident()
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

// TestHotPathsDoNotAllocate guards the figures BenchmarkGetHit and
// BenchmarkEvict report: a hit, an eviction check that evicts nothing, Has
// and Stats allocate nothing.
func TestHotPathsDoNotAllocate(t *testing.T) {
	c, ctx, snap := fillCache(t, 8, 0)
	empty := cachepool.New()
	if _, err := benchHit.Get(ctx); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		f    func()
	}{
		{"Get hit", func() { benchHit.Get(ctx) }},
		{"Get hit, Default cache", func() { benchHit.Get(context.Background()) }},
		{"Evict keeping all", func() { c.Evict(snap.Contains) }},
		{"EvictGen unchanged", func() { c.EvictGen(snap.Gen, snap.Contains) }},
		{"Evict on an empty cache", func() { empty.Evict(snap.Contains) }},
		{"Has", func() { c.Has(benchHit.Key()) }},
		{"Stats", func() { c.Stats() }},
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
