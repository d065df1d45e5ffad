package cachepool_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/poolrun/poolrun/cachepool"
)

// sizedItems defines one item per size, named after its index, whose
// value is its size; a negative size stands for an item without Size
// (its value is then the size negated).
func sizedItems(t *testing.T, sizes ...int64) []*cachepool.Item[int64] {
	items := make([]*cachepool.Item[int64], len(sizes))
	for i, n := range sizes {
		name := uniqueName(t, fmt.Sprint(i))
		if n < 0 {
			items[i] = cachepool.Define(name, func(context.Context) (int64, error) { return -n, nil })
			continue
		}
		items[i] = cachepool.Define(name, func(context.Context) (int64, error) { return n, nil },
			cachepool.Size(func(v int64) int64 { return v }))
	}
	return items
}

// getAll gets items[i] for each i in order, failing the test on an error.
func getAll(t *testing.T, ctx context.Context, items []*cachepool.Item[int64], order ...int) {
	t.Helper()
	for _, i := range order {
		if _, err := items[i].Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// byLastUse returns the indexes into items of the resident items, least
// recently used first, as Resident's LastUse orders them.
func byLastUse(c *cachepool.Cache, items []*cachepool.Item[int64]) []int {
	res := c.Resident(nil)
	slices.SortFunc(res, func(a, b cachepool.Resident) int { return cmp.Compare(a.LastUse, b.LastUse) })
	var idx []int
	for _, r := range res {
		idx = append(idx, slices.IndexFunc(items, func(it *cachepool.Item[int64]) bool { return it.Key() == r.Key }))
	}
	return idx
}

func TestResident(t *testing.T) {
	ctx, c := newCtx(t)
	if got := c.Resident(nil); got != nil {
		t.Errorf("Resident(nil) of an empty cache = %+v, want nil", got)
	}
	items := sizedItems(t, 300, 100, -7, 0)
	getAll(t, ctx, items, 0, 1, 2, 3)

	want := []cachepool.Resident{
		{Key: items[0].Key(), Name: items[0].Name(), Bytes: 300},
		{Key: items[1].Key(), Name: items[1].Name(), Bytes: 100},
		{Key: items[2].Key(), Name: items[2].Name(), Bytes: 0}, // no Size
		{Key: items[3].Key(), Name: items[3].Name(), Bytes: 0},
	}
	slices.SortFunc(want, func(a, b cachepool.Resident) int { return cmp.Compare(a.Key, b.Key) })

	prefix := cachepool.Resident{Key: 1, Name: "already there"}
	dst := make([]cachepool.Resident, 1, 10)
	dst[0] = prefix
	got := c.Resident(dst)
	if &got[0] != &dst[0] || got[0] != prefix {
		t.Errorf("Resident(dst) did not append to dst in place: %+v", got)
	}
	got = got[1:]
	if len(got) != len(want) {
		t.Fatalf("Resident = %+v, want %d items", got, len(want))
	}
	var bytes int64
	for i, r := range got {
		if r.Key != want[i].Key || r.Name != want[i].Name || r.Bytes != want[i].Bytes {
			t.Errorf("Resident[%d] = %+v, want %+v (sorted by Key)", i, r, want[i])
		}
		if r.LastUse == 0 {
			t.Errorf("Resident[%d].LastUse = 0", i)
		}
		bytes += r.Bytes
	}
	if st := c.Stats(); st.Bytes != bytes || st.Resident != len(got) {
		t.Errorf("Stats = %+v, want Bytes %d Resident %d as Resident reports", st, bytes, len(got))
	}

	// Evicted items are gone, items being evicted too; the rest stay.
	c.Evict(func(k uint64) bool { return k != items[0].Key() })
	if got := residentKeys(c); !slices.Equal(got, sorted([]uint64{items[1].Key(), items[2].Key(), items[3].Key()})) {
		t.Errorf("Resident after evicting item 0 = %x", got)
	}
	c.Clear()
	if got := c.Resident(dst[:0]); len(got) != 0 {
		t.Errorf("Resident after Clear = %+v", got)
	}
}

// TestLastUse checks that LastUse orders the resident items by their
// latest Get, whatever the sequence of hits, builds and evictions.
func TestLastUse(t *testing.T) {
	tests := []struct {
		name  string
		gets  []int // -1: evict item 0
		order []int // want: resident items, least recently used first
	}{
		{"build order", []int{0, 1, 2}, []int{0, 1, 2}},
		{"a hit moves an item last", []int{0, 1, 2, 0}, []int{1, 2, 0}},
		{"repeated hits", []int{0, 0, 0, 1, 1, 2, 2, 2, 1}, []int{0, 2, 1}},
		{"hits of all in reverse", []int{0, 1, 2, 2, 1, 0}, []int{2, 1, 0}},
		{"the latest of a run counts", []int{0, 1, 0, 0, 2, 1, 1}, []int{0, 2, 1}},
		{"a rebuild is a use", []int{0, 1, 2, -1, 0}, []int{1, 2, 0}},
		{"eviction of the latest", []int{1, 2, 0, -1, 2, 1}, []int{2, 1}},
		{"eviction, then hits", []int{0, 1, 2, 1, -1, 2}, []int{1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, c := newCtx(t)
			items := sizedItems(t, 1, 2, 3)
			var last uint64
			for _, i := range tt.gets {
				if i < 0 {
					c.Evict(func(k uint64) bool { return k != items[0].Key() })
					continue
				}
				getAll(t, ctx, items, i)
				// The item just got is the most recently used.
				res := c.Resident(nil)
				max := slices.MaxFunc(res, func(a, b cachepool.Resident) int { return cmp.Compare(a.LastUse, b.LastUse) })
				if max.Key != items[i].Key() {
					t.Fatalf("after Get of item %d, %s has the largest LastUse: %+v", i, max.Name, res)
				}
				if max.LastUse < last {
					t.Fatalf("the largest LastUse went back from %d to %d", last, max.LastUse)
				}
				last = max.LastUse
			}
			if got := byLastUse(c, items); !slices.Equal(got, tt.order) {
				t.Errorf("items by LastUse: %v, want %v", got, tt.order)
			}
		})
	}
}

// TestVersion drives one cache through every kind of change, and of
// non-change, of its resident set.
func TestVersion(t *testing.T) {
	ctx, c := newCtx(t)
	if v := c.Version(); v != 0 {
		t.Errorf("Version of a new cache = %d, want 0", v)
	}
	items := sizedItems(t, 10, 20, 30)
	failing := cachepool.Define(uniqueName(t, "failing"), (&counter{failOn: map[int64]bool{1: true}}).build)
	only := func(keys ...uint64) func(uint64) bool {
		return func(k uint64) bool { return slices.Contains(keys, k) }
	}
	steps := []struct {
		name    string
		do      func()
		changes bool
	}{
		{"build 0", func() { getAll(t, ctx, items, 0) }, true},
		{"hit 0", func() { getAll(t, ctx, items, 0) }, false},
		{"build 1 and 2", func() { getAll(t, ctx, items, 1, 2) }, true},
		{"failed build", func() { failing.Get(ctx) }, false},
		{"Stats, Resident, Has", func() { c.Stats(); c.Resident(nil); c.Has(items[0].Key()) }, false},
		{"Evict nothing", func() { c.Evict(func(uint64) bool { return true }) }, false},
		{"EvictGen scans, evicts nothing", func() { c.EvictGen(1, func(uint64) bool { return true }) }, false},
		{"Evict 2", func() { c.Evict(only(items[0].Key(), items[1].Key())) }, true},
		{"EvictLRU under target", func() { c.EvictLRU(30, nil) }, false},
		{"EvictLRU sparing all", func() { c.EvictLRU(0, func(uint64) bool { return true }) }, false},
		{"EvictLRU 0", func() { c.EvictLRU(20, nil) }, true},
		{"EvictGen 1", func() { getAll(t, ctx, items, 2); c.EvictGen(2, only(items[2].Key())) }, true},
		{"EvictGen, same gen", func() { c.EvictGen(2, only(items[2].Key())) }, false},
		{"Clear", func() { c.Clear() }, true},
		{"Clear an empty cache", func() { c.Clear() }, false},
		{"build after a failure", func() { failing.Get(ctx) }, true},
	}
	for _, s := range steps {
		before := c.Version()
		s.do()
		after := c.Version()
		switch {
		case s.changes && after <= before:
			t.Errorf("%s: Version %d -> %d, want it to increase", s.name, before, after)
		case !s.changes && after != before:
			t.Errorf("%s: Version %d -> %d, want no change", s.name, before, after)
		}
	}
	// Sanity: the steps evicted what they say.
	if got := residentKeys(c); !slices.Equal(got, []uint64{failing.Key()}) {
		t.Errorf("Resident at the end = %x, want only the item that failed once", got)
	}
	if st := c.Stats(); st.Evictions != 4 {
		t.Errorf("Evictions = %d, want 4", st.Evictions)
	}
}

func TestKeys(t *testing.T) {
	ctx, c := newCtx(t)
	if got := c.Keys(nil); got != nil {
		t.Errorf("Keys(nil) of an empty cache = %x, want nil", got)
	}
	items := sizedItems(t, 1, 2, 3)
	getAll(t, ctx, items, 2, 0, 1)
	want := []uint64{9, items[2].Key(), items[0].Key(), items[1].Key()} // build order, after dst's
	dst := make([]uint64, 1, 8)
	dst[0] = 9
	if got := c.Keys(dst); !slices.Equal(got, want) || &got[0] != &dst[0] {
		t.Errorf("Keys = %x, want %x appended in place", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { c.Keys(dst[:0]) }); n != 0 {
		t.Errorf("Keys allocates %v times, want 0", n)
	}
	c.Evict(func(k uint64) bool { return k != items[0].Key() })
	if got := c.Keys(nil); !slices.Equal(got, []uint64{items[2].Key(), items[1].Key()}) {
		t.Errorf("Keys after evicting item 0 = %x", got)
	}
}
