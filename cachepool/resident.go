package cachepool

import (
	"cmp"
	"slices"
)

// Resident describes an item resident in a [Cache], as [Cache.Resident]
// reports it.
type Resident struct {
	// Key is the item's key, [Key](Name); never 0.
	Key uint64
	// Name is the item's name.
	Name string
	// Bytes is the size of the item's value, as its [Size] function
	// reported it right after the build. 0 when the item has no Size (or
	// the value is empty, or Size panicked).
	Bytes int64
	// LastUse orders the resident items by their most recent use: of two
	// resident items, the one with the smaller LastUse was last returned by
	// a Get (hit or build) before the other was. It is a reading of the
	// cache's use clock, a counter that advances by one whenever a Get
	// returns the value of another item than the latest Get did (a build
	// always advances it): consecutive Gets of one item, as in a loop,
	// leave it, and LastUse, as they are. It is never 0. Of Gets that run
	// at the same time in different goroutines, any may count as the
	// later.
	LastUse uint64
}

// Resident appends to dst the items resident in c (built, and neither
// evicted nor being evicted), sorted by Key, and returns the extended
// slice. It allocates only when dst lacks the room; a caller that reports
// its resident set after every job can reuse one slice (pass dst[:0]).
// It holds c's lock while it copies, one entry per resident item; the sort
// runs after.
//
// To send the set only when it changes, read [Cache.Version] first and
// call Resident when it differs from the version of the set last sent: a
// change in between then shows as another change of Version later.
func (c *Cache) Resident(dst []Resident) []Resident {
	c.mu.Lock()
	n := len(dst)
	dst = slices.Grow(dst, len(c.resident))
	for _, e := range c.resident {
		dst = append(dst, Resident{Key: e.b.key, Name: e.b.name, Bytes: e.size, LastUse: e.lastUse.Load()})
	}
	c.mu.Unlock()
	slices.SortFunc(dst[n:], func(a, b Resident) int { return cmp.Compare(a.Key, b.Key) })
	return dst
}

// Keys appends to dst the keys of the items resident in c, in the order
// they were built, and returns the extended slice; it allocates only when
// dst lacks the room. It is [Cache.Resident] for a caller that decides by
// keys alone, such as a worker that asks its window which of them it no
// longer lists (then [Cache.Evict]s those): it holds c's lock only to copy
// the keys. Read [Cache.Version] first to know which resident set the
// keys were.
func (c *Cache) Keys(dst []uint64) []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append(dst, c.keys...)
}

// Version returns a number that changes whenever the set of items resident
// in c changes, and only then: it increases when a build succeeds and its
// value is memoised, and when [Cache.Evict], [Cache.EvictGen],
// [Cache.Clear] or [Cache.EvictLRU] take items out (as they decide, before
// the cleanups run). Hits, failed builds and evictions that evict nothing
// leave it as it is. A new cache's version is 0.
//
// It is one atomic load and does not allocate: a worker can compare it
// after every job with the version of the set it last reported (see
// [Cache.Resident]).
func (c *Cache) Version() uint64 {
	return c.version.Load()
}

// Has reports whether the item with the given key is resident in c: built,
// and neither evicted nor being evicted.
func (c *Cache) Has(key uint64) bool {
	b := reg.byKeyLookup(key)
	if b == nil {
		return false
	}
	e := c.slot(b.id)
	return e != nil && e.state.Load() == stateReady
}
