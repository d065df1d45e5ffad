package cachepool_test

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/shm"
)

// Items are defined at package level, so that every process running this
// binary holds the same definitions.
var exampleWords = cachepool.Define("example/words", func(ctx context.Context) ([]string, error) {
	fmt.Println("building words")
	return strings.Fields("the quick brown fox"), nil
},
	cachepool.Size(func(w []string) int64 { return int64(len(w)) * 16 }),
	cachepool.Cleanup(func(w []string) { fmt.Println("cleaning up", len(w), "words") }))

var exampleIndex = cachepool.Define("example/index", func(ctx context.Context) (map[string]int, error) {
	fmt.Println("building index")
	words, err := exampleWords.Get(ctx) // items may use other items
	if err != nil {
		return nil, err
	}
	idx := make(map[string]int)
	for i, w := range words {
		idx[w] = i
	}
	return idx, nil
})

func ExampleDefine() {
	ctx := cachepool.WithCache(context.Background(), cachepool.New())

	for range 2 {
		words, err := exampleWords.Get(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(words)
	}
	st := cachepool.FromContext(ctx).Stats()
	fmt.Printf("hits %d, builds %d, resident %d, bytes %d\n", st.Hits, st.Builds, st.Resident, st.Bytes)
	// Output:
	// building words
	// [the quick brown fox]
	// [the quick brown fox]
	// hits 1, builds 1, resident 1, bytes 64
}

func ExampleCache_Evict() {
	c := cachepool.New()
	ctx := cachepool.WithCache(context.Background(), c)
	idx, _ := exampleIndex.Get(ctx) // builds the words too
	fmt.Println("fox at", idx["fox"])

	// The pool still needs the index, but no longer the words.
	required := []uint64{exampleIndex.Key()}
	evicted := c.Evict(func(key uint64) bool { return slices.Contains(required, key) })
	for _, key := range evicted {
		h, _ := cachepool.Lookup(key)
		fmt.Println("evicted", h.Name())
	}
	fmt.Println("index resident:", c.Has(exampleIndex.Key()), "words resident:", c.Has(exampleWords.Key()))
	c.Clear()
	// Output:
	// building index
	// building words
	// fox at 3
	// cleaning up 4 words
	// evicted example/words
	// index resident: true words resident: false
}

// A worker checks the window before each job: it evicts what the parent no
// longer lists.
func ExampleCache_Evict_window() {
	w, err := shm.Create(shm.DefaultCapacity) // in the parent
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()

	c := cachepool.New()
	ctx := cachepool.WithCache(context.Background(), c)
	exampleIndex.Get(ctx)

	// The parent publishes what the remaining jobs need ...
	w.Publish([]uint64{exampleWords.Key()})
	// ... and the worker, before its next job, evicts the rest.
	snap, err := w.Snapshot(nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, key := range c.EvictGen(snap.Gen, snap.Contains) {
		h, _ := cachepool.Lookup(key)
		fmt.Println("evicted", h.Name())
	}
	// Nothing changed since: no scan at all.
	fmt.Println(c.EvictGen(snap.Gen, snap.Contains) == nil)
	c.Clear()
	// Output:
	// building index
	// building words
	// evicted example/index
	// true
	// cleaning up 4 words
}

type exampleCell struct {
	Name   string
	Radius float64
}

// Families define items whose names come from run-time data, such as the
// cell types of a configuration file.
var exampleMorphologies = cachepool.DefineFamily("example/morphology",
	func(ctx context.Context, cell exampleCell) (string, error) {
		return fmt.Sprintf("%s morphology, radius %.1f", cell.Name, cell.Radius), nil
	},
	cachepool.MemberName(func(cell exampleCell) string { return cell.Name }))

func ExampleDefineFamily() {
	ctx := cachepool.WithCache(context.Background(), cachepool.New())
	for _, cell := range []exampleCell{{"granule", 2.5}, {"purkinje", 8}} {
		it := exampleMorphologies.Item(cell) // the same *Item for the same cell
		m, _ := it.Get(ctx)
		fmt.Printf("%s: %s\n", it.Name(), m)
	}
	h, ok := cachepool.Lookup(cachepool.Key("example/morphology:granule"))
	fmt.Println(h.Name(), ok)
	// Output:
	// example/morphology:granule: granule morphology, radius 2.5
	// example/morphology:purkinje: purkinje morphology, radius 8.0
	// example/morphology:granule true
}

func ExampleKey() {
	fmt.Printf("%#016x\n", cachepool.Key("atlas"))
	fmt.Println(exampleWords.Key() == cachepool.Key(exampleWords.Name()))
	// Output:
	// 0xbef29fdf401c6afc
	// true
}

// exampleBlocks are items of 40 bytes each.
var exampleBlocks = cachepool.DefineFamily("example/block", func(ctx context.Context, name string) ([]byte, error) {
	return make([]byte, 40), nil
}, cachepool.Size(func(b []byte) int64 { return int64(len(b)) }))

// A worker held to a memory budget makes room before each build: it evicts
// the least recently used items that the job at hand does not need.
func ExampleCache_SetBeforeBuild() {
	const budget = 100
	c := cachepool.New()
	ctx := cachepool.WithCache(context.Background(), c)
	var needed []uint64 // the keys of the job at hand
	c.SetBeforeBuild(func(key uint64, lastBytes int64) {
		room := max(lastBytes, 40) // a first build has no size yet: guess
		for _, k := range c.EvictLRU(budget-room, func(k uint64) bool { return slices.Contains(needed, k) }) {
			h, _ := cachepool.Lookup(k)
			fmt.Println("evicted", h.Name())
		}
	})
	job := func(names ...string) {
		needed = needed[:0]
		for _, name := range names {
			needed = append(needed, exampleBlocks.Item(name).Key())
		}
		for _, name := range names {
			exampleBlocks.Item(name).Get(ctx)
		}
	}

	job("a", "b")
	job("c", "a") // b goes: a is needed
	version := c.Version()
	job("a")                            // a hit: nothing changes
	fmt.Println(c.Version() == version) // so nothing to report
	job("d")                            // c goes: a was used after it
	for _, r := range c.Resident(nil) {
		fmt.Println(r.Name, r.Bytes)
	}
	st := c.Stats()
	fmt.Printf("bytes %d, peak %d, evictions %d\n", st.Bytes, st.PeakBytes, st.Evictions)
	c.Clear()
	// Output:
	// evicted example/block:b
	// true
	// evicted example/block:c
	// example/block:a 40
	// example/block:d 40
	// bytes 80, peak 80, evictions 2
}
