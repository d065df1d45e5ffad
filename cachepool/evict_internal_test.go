package cachepool

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// checkInvariants checks c's resident bookkeeping: the resident list and
// its keys agree, every resident entry is ready, in its slot and counted in
// bytes, the last sizes are those of the resident entries, and at most one
// entry holds the clock's reading.
func checkInvariants(t *testing.T, c *Cache) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.resident) != len(c.keys) {
		t.Fatalf("%d resident entries, %d keys", len(c.resident), len(c.keys))
	}
	var bytes int64
	latest := 0
	clock := c.clock.Load()
	for i, e := range c.resident {
		if c.keys[i] != e.b.key {
			t.Errorf("keys[%d] = %x, want %x (%s)", i, c.keys[i], e.b.key, e.b.name)
		}
		if s := e.state.Load(); s != stateReady {
			t.Errorf("resident %s in state %d", e.b.name, s)
		}
		if c.slot(e.b.id) != e {
			t.Errorf("resident %s is not in its slot", e.b.name)
		}
		if slices.Index(c.resident, e) != i {
			t.Errorf("%s resident twice", e.b.name)
		}
		if c.lastBytesLocked(e.b.id) != e.size {
			t.Errorf("%s: last size %d, want its size %d", e.b.name, c.lastBytesLocked(e.b.id), e.size)
		}
		if u := e.lastUse.Load(); u == 0 || u > clock {
			t.Errorf("%s: lastUse %d, clock %d", e.b.name, u, clock)
		} else if u == clock {
			latest++
		}
		bytes += e.size
	}
	if latest > 1 {
		t.Errorf("%d entries hold the clock's reading %d", latest, clock)
	}
	if bytes != c.bytes || c.peak < c.bytes {
		t.Errorf("bytes %d (peak %d), want the sum of the sizes %d", c.bytes, c.peak, bytes)
	}
}

// TestEvictionPathsAgainstModel runs random sequences of Gets and of every
// eviction method against a model of the resident set (in build order and
// in use order), and checks after each step the keys returned, the
// statistics, Version, Resident and the bookkeeping.
func TestEvictionPathsAgainstModel(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))

	sizes := []int64{100, 200, 300, 0, -1, 50} // -1: no Size
	items := make([]*Item[int], len(sizes))
	cleanups := make([]int, len(sizes))
	for i, n := range sizes {
		opts := []Option{Cleanup(func(v int) { cleanups[v]++ })}
		if n >= 0 {
			opts = append(opts, Size(func(int) int64 { return n }))
		}
		items[i] = Define(fmt.Sprintf("internal/model/%d#%d", i, internalSeq.Add(1)),
			func(context.Context) (int, error) { return i, nil }, opts...)
	}
	size := func(i int) int64 { return max(sizes[i], 0) }
	index := func(key uint64) int {
		return slices.IndexFunc(items, func(it *Item[int]) bool { return it.key == key })
	}

	c := New()
	ctx := WithCache(context.Background(), c)
	var (
		built, used       []int // the model: resident items in build order, in use order
		builds, evictions uint64
		bytes, peak       int64
		genMasks          = map[uint64]uint32{} // EvictGen: one set per generation
		lastGen           uint64
		lastScanned       = false
		versionAtLastScan uint64
	)
	mask := func() uint32 { return r.Uint32() }
	keepOf := func(m uint32) func(uint64) bool {
		return func(k uint64) bool { return m&(1<<index(k)) != 0 }
	}
	// evicted updates the model for victims, in the order the method
	// returns them.
	evicted := func(victims []int) []uint64 {
		var keys []uint64
		for _, i := range victims {
			keys = append(keys, items[i].key)
			built = slices.DeleteFunc(built, func(j int) bool { return j == i })
			used = slices.DeleteFunc(used, func(j int) bool { return j == i })
			bytes -= size(i)
			evictions++
		}
		return keys
	}
	notKept := func(m uint32, order []int) []int {
		var v []int
		for _, i := range order {
			if m&(1<<i) == 0 {
				v = append(v, i)
			}
		}
		return v
	}
	reversed := func(s []int) []int { s = slices.Clone(s); slices.Reverse(s); return s }

	for step := range 2000 {
		var op string
		var got, want []uint64
		versionBefore := c.Version()
		residentBefore := slices.Clone(built)
		switch n := r.IntN(10); {
		case n < 5:
			i := r.IntN(len(items))
			op = fmt.Sprintf("Get %d", i)
			if v, err := items[i].Get(ctx); err != nil || v != i {
				t.Fatalf("step %d: %s = %d, %v", step, op, v, err)
			}
			if !slices.Contains(built, i) {
				built = append(built, i)
				builds++
				bytes += size(i)
				peak = max(peak, bytes)
			}
			used = append(slices.DeleteFunc(used, func(j int) bool { return j == i }), i)
		case n == 5:
			m := mask()
			op = fmt.Sprintf("Evict %06b", m&63)
			got = c.Evict(keepOf(m))
			want = evicted(reversed(notKept(m, built)))
		case n == 6:
			gen := uint64(r.IntN(3))
			if _, ok := genMasks[gen]; !ok {
				genMasks[gen] = mask()
			}
			m := genMasks[gen]
			op = fmt.Sprintf("EvictGen %d (%06b)", gen, m&63)
			got = c.EvictGen(gen, keepOf(m))
			if !(lastScanned && gen == lastGen && versionBefore == versionAtLastScan) {
				want = evicted(reversed(notKept(m, built)))
			}
			lastScanned, lastGen, versionAtLastScan = true, gen, c.Version()
		case n == 7:
			op = "Clear"
			got = c.Clear()
			want = evicted(reversed(built))
		default:
			target := r.Int64N(800) - 50
			m := mask()
			keep := keepOf(m)
			if r.IntN(4) == 0 {
				m, keep = 0, nil
			}
			op = fmt.Sprintf("EvictLRU %d %06b", target, m&63)
			got = c.EvictLRU(target, keep)
			var victims []int
			left := bytes
			for _, i := range notKept(m, used) {
				if left <= target {
					break
				}
				victims = append(victims, i)
				left -= size(i)
			}
			want = evicted(victims)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: %s returned %x, want %x (items %v)", step, op, got, want, indexes(got, index))
		}
		checkInvariants(t, c)
		st := c.Stats()
		if st.Builds != builds || st.Evictions != evictions || st.Bytes != bytes || st.PeakBytes != peak || st.Resident != len(built) {
			t.Fatalf("step %d: %s: Stats %+v, want Builds %d Evictions %d Bytes %d PeakBytes %d Resident %d",
				step, op, st, builds, evictions, bytes, peak, len(built))
		}
		changed := !slices.Equal(sortedInts(residentBefore), sortedInts(built))
		if v := c.Version(); changed != (v != versionBefore) {
			t.Fatalf("step %d: %s: resident %v -> %v, Version %d -> %d", step, op, residentBefore, built, versionBefore, v)
		}
		res := c.Resident(nil)
		if len(res) != len(used) {
			t.Fatalf("step %d: %s: Resident %+v, want items %v", step, op, res, used)
		}
		slices.SortFunc(res, func(a, b Resident) int { return cmp.Compare(a.LastUse, b.LastUse) })
		for j, x := range res {
			if i := used[j]; x.Key != items[i].key || x.Name != items[i].name || x.Bytes != size(i) {
				t.Fatalf("step %d: %s: Resident by LastUse %+v, want items %v in this order", step, op, res, used)
			}
		}
	}
	c.Clear()
	var total int
	for _, n := range cleanups {
		total += n
	}
	if uint64(total) != builds {
		t.Errorf("%d cleanups for %d builds", total, builds)
	}
}

func sortedInts(s []int) []int {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func indexes(keys []uint64, index func(uint64) int) []int {
	var idx []int
	for _, k := range keys {
		idx = append(idx, index(k))
	}
	return idx
}
