package cachepool_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/shm"
)

// TestEvictAgainstWindow evicts against snapshots of a real shm.Window: the
// non-required items go, the required ones stay, and an overflowed window
// keeps everything.
func TestEvictAgainstWindow(t *testing.T) {
	const capacity = 16
	w, err := shm.Create(capacity)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })

	var mu sync.Mutex
	cleaned, built := map[int]int{}, map[int]int{}
	fam := cachepool.DefineFamily(uniqueName(t, "cells"), func(ctx context.Context, p int) (int, error) {
		mu.Lock()
		built[p]++
		mu.Unlock()
		return p, nil
	}, cachepool.Cleanup(func(p int) { mu.Lock(); cleaned[p]++; mu.Unlock() }))
	ctx, c := newCtx(t)
	const n = 8
	buildAll := func() {
		for i := range n {
			if _, err := fam.Item(i).Get(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	keysOf := func(idx ...int) []uint64 {
		var keys []uint64
		for _, i := range idx {
			keys = append(keys, fam.Item(i).Key())
		}
		slices.Sort(keys)
		return keys
	}
	snapshot := func() shm.Snapshot {
		s, err := w.Snapshot(nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	buildAll()

	// Items 0, 2, 4, 6 are required, with keys of items this process never
	// built.
	required := append(keysOf(0, 2, 4, 6), cachepool.Key("elsewhere:1"), cachepool.Key("elsewhere:2"))
	if _, err := w.Publish(required); err != nil {
		t.Fatal(err)
	}
	snap := snapshot()
	got := c.Evict(snap.Contains)
	if want := keysOf(1, 3, 5, 7); !slices.Equal(sorted(got), want) {
		t.Errorf("Evict(snapshot.Contains) = %x, want %x", sorted(got), want)
	}
	if got, want := residentKeys(c), keysOf(0, 2, 4, 6); !slices.Equal(got, want) {
		t.Errorf("Resident = %x, want %x", got, want)
	}
	for i := range n {
		if want := i % 2; cleaned[i] != want {
			t.Errorf("item %d cleaned %d times, want %d", i, cleaned[i], want)
		}
	}

	// More required keys than the window holds: it overflows, and nothing
	// may be evicted, not even items the listed keys leave out.
	buildAll()
	var tooMany []uint64
	for i := range capacity + 1 {
		tooMany = append(tooMany, cachepool.Key("elsewhere:"+string(rune('a'+i))))
	}
	if _, err := w.Publish(tooMany); !errors.Is(err, shm.ErrOverflow) {
		t.Fatalf("Publish of %d keys into %d slots: %v, want ErrOverflow", len(tooMany), capacity, err)
	}
	over := snapshot()
	if !over.Overflow {
		t.Fatal("snapshot not marked overflowed")
	}
	if got := c.Evict(over.Contains); got != nil {
		t.Errorf("Evict against an overflowed snapshot = %x, want nil", got)
	}
	if got := c.EvictGen(over.Gen, over.Contains); got != nil {
		t.Errorf("EvictGen against an overflowed snapshot = %x, want nil", got)
	}
	if st := c.Stats(); st.Resident != n {
		t.Errorf("Resident = %d after an overflowed snapshot, want %d", st.Resident, n)
	}

	// Once the set fits again, eviction resumes: EvictGen with the new
	// generation scans, and the same generation again does not.
	if _, err := w.Publish(keysOf(3)); err != nil {
		t.Fatal(err)
	}
	fits := snapshot()
	if fits.Gen == over.Gen || fits.Overflow {
		t.Fatalf("new snapshot gen %d (overflowed gen %d), overflow %v", fits.Gen, over.Gen, fits.Overflow)
	}
	if got, want := sorted(c.EvictGen(fits.Gen, fits.Contains)), keysOf(0, 1, 2, 4, 5, 6, 7); !slices.Equal(got, want) {
		t.Errorf("EvictGen = %x, want %x", got, want)
	}
	if got := c.EvictGen(fits.Gen, func(uint64) bool { t.Error("keep called for an unchanged generation"); return false }); got != nil {
		t.Errorf("EvictGen with an unchanged generation = %x, want nil", got)
	}
	if got := residentKeys(c); !slices.Equal(got, keysOf(3)) {
		t.Errorf("Resident = %x, want only item 3", got)
	}
	if got := c.Clear(); !slices.Equal(got, keysOf(3)) {
		t.Errorf("Clear = %x", got)
	}
	for i := range n {
		// Odd items were evicted in the first round and built again.
		if want := 1 + i%2; built[i] != want || cleaned[i] != want {
			t.Errorf("item %d built %d and cleaned %d times, want %d each", i, built[i], cleaned[i], want)
		}
	}
}
