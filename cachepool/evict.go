package cachepool

import (
	"cmp"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
)

// Every eviction (Evict, EvictGen, Clear, EvictLRU) goes the same two
// steps: under c.mu, detachLocked takes the victims out of the resident
// list, marks them evicting and counts them (Stats, Version); then, without
// the lock, cleanUp runs their cleanups and frees their slots.

// Evict cleans up every resident item whose key keep rejects, and returns
// their keys in the order their cleanups ran: the most recently built first.
// It returns nil, without allocating, when it evicts nothing.
//
// Each evicted item's cleanup (see [Cleanup]; by default, Close for an
// io.Closer) runs once, in the calling goroutine, before Evict returns. From
// the moment Evict has decided, a Get of an evicted item no longer sees the
// old value: it waits for the cleanup and then builds again. Items whose
// build is in progress are not resident; Evict leaves them alone and a later
// Evict judges them. Failures of cleanups go to the error handler (see
// [Cache.SetErrorHandler]); the item is evicted all the same.
//
// keep is called once per resident item while c is locked, so it must be
// quick and must not call methods of c; the intended one is
// [github.com/poolrun/poolrun/shm.Snapshot.Contains]. Keys only decide what
// goes: a key that two items shared could only keep an item longer, never
// clean up the wrong one.
func (c *Cache) Evict(keep func(key uint64) bool) []uint64 {
	victims := c.detach(keep)
	if victims == nil {
		return nil
	}
	return c.cleanUp(victims)
}

// EvictGen is [Cache.Evict] for callers that can name the set keep decides
// by: gen must identify it, as the Gen of a
// [github.com/poolrun/poolrun/shm.Snapshot] does for its Contains (two calls
// with the same gen must pass functions that agree). When the previous
// EvictGen scanned with the same gen and the resident set has not changed
// since (see [Cache.Version]), every resident item has already been kept by
// that set, so EvictGen returns nil without calling keep: a worker that
// checks the window before every job pays for a scan only when something
// changed. (An eviction by another method since then also counts as a
// change, and costs one scan that finds nothing.)
func (c *Cache) EvictGen(gen uint64, keep func(key uint64) bool) []uint64 {
	victims, skipped := c.detachGen(gen, keep)
	if skipped || victims == nil {
		return nil
	}
	return c.cleanUp(victims)
}

// Clear evicts every resident item, as [Cache.Evict] with a keep that
// rejects everything; at the end of a pool it frees all that c holds.
// Items whose build is in progress stay.
func (c *Cache) Clear() []uint64 {
	victims := c.detach(keepNone)
	if victims == nil {
		return nil
	}
	return c.cleanUp(victims)
}

func keepNone(uint64) bool { return false }

// EvictLRU evicts resident items that keep rejects, least recently used
// first (the smallest [Resident.LastUse] first), until the sum of the
// resident items' sizes ([Stats.Bytes]) is at most target or no such item
// is left, and returns their keys in that order. A nil keep keeps nothing.
// It returns nil, without calling keep, when Bytes is already at most
// target, and nil when keep spares every resident item.
//
// It is meant for a memory budget: a worker about to build an item (see
// [Cache.SetBeforeBuild]) makes room for it by evicting what the job at
// hand does not need. Items without [Size] count 0 bytes: evicting one
// does not bring Bytes nearer target, but it is evicted in its turn all
// the same, as the order is by use alone.
//
// Everything else is as for [Cache.Evict]: the cleanups run once each, in
// the calling goroutine, in the order of the returned keys, before EvictLRU
// returns; items whose build is in progress are never touched; evicted
// items count in [Stats.Evictions] and change [Cache.Version]. keep is
// called at most once per resident item while c is locked, so it must be
// quick and must not call methods of c.
//
// Under c's lock, EvictLRU costs a pass over the resident items and a sort
// of those that keep rejects.
func (c *Cache) EvictLRU(target int64, keep func(key uint64) bool) []uint64 {
	victims := c.detachLRU(target, keep)
	if victims == nil {
		return nil
	}
	return c.cleanUp(victims)
}

func (c *Cache) detach(keep func(uint64) bool) []*entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.detachKeep(keep)
}

func (c *Cache) detachGen(gen uint64, keep func(uint64) bool) (victims []*entry, skipped bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.scanned && c.scanGen == gen && c.scanVersion == c.version.Load() {
		return nil, true
	}
	victims = c.detachKeep(keep)
	c.scanned, c.scanGen, c.scanVersion = true, gen, c.version.Load()
	return victims, false
}

// detachKeep detaches the resident entries that keep rejects and returns
// them, the most recently built first. c.mu must be held. keep runs for
// every entry before anything changes, so a panic in keep leaves c as it
// was.
func (c *Cache) detachKeep(keep func(uint64) bool) []*entry {
	keys := c.keys
	i := 0
	for i < len(keys) && keep(keys[i]) {
		i++
	}
	if i == len(keys) {
		return nil
	}
	victims := []*entry{c.resident[i]}
	for j := i + 1; j < len(keys); j++ {
		if !keep(keys[j]) {
			victims = append(victims, c.resident[j])
		}
	}
	c.detachLocked(victims)
	slices.Reverse(victims)
	return victims
}

// lruCandidate is a resident entry that EvictLRU may evict: its index in
// c.resident, and its last use when EvictLRU looked. It holds no pointer,
// so that the scratch slice kept in c retains no evicted value.
type lruCandidate struct {
	lastUse uint64
	i       int
}

// detachLRU detaches the entries that EvictLRU evicts and returns them, the
// least recently used first.
func (c *Cache) detachLRU(target int64, keep func(uint64) bool) []*entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bytes <= target {
		return nil
	}
	cand := c.lru[:0]
	for i, k := range c.keys {
		if keep == nil || !keep(k) {
			// Gets keep storing lastUse: sort by a copy, or the order
			// could change under the sort.
			cand = append(cand, lruCandidate{c.resident[i].lastUse.Load(), i})
		}
	}
	c.lru = cand[:0]
	if len(cand) == 0 {
		return nil
	}
	slices.SortFunc(cand, func(a, b lruCandidate) int {
		return cmp.Or(cmp.Compare(a.lastUse, b.lastUse), cmp.Compare(a.i, b.i))
	})
	var victims []*entry
	for bytes := c.bytes; bytes > target && len(victims) < len(cand); {
		e := c.resident[cand[len(victims)].i]
		victims = append(victims, e)
		bytes -= e.size
	}
	c.detachLocked(victims)
	return victims
}

// detachLocked takes victims, which are resident and not empty, out of the
// resident list, marks them evicting and counts them. c.mu must be held.
// From here on, a Get of a victim waits for its cleanup.
func (c *Cache) detachLocked(victims []*entry) {
	c.recordEvictions(victims)
	for _, e := range victims {
		e.gone = make(chan struct{})
		e.state.Store(stateEvicting)
		c.bytes -= e.size
		c.evictions++
	}
	res, keys := c.resident, c.keys
	n := 0
	for j, e := range res {
		if e.state.Load() == stateReady { // all but the victims
			res[n], keys[n] = e, keys[j]
			n++
		}
	}
	clear(res[n:])
	c.resident, c.keys = res[:n], keys[:n]
	c.version.Add(1)
}

// cleanUp runs the cleanups of victims in their order, frees their slots
// and releases the Gets waiting for them. It returns the victims' keys in
// the same order.
func (c *Cache) cleanUp(victims []*entry) []uint64 {
	keys := make([]uint64, 0, len(victims))
	for _, e := range victims {
		keys = append(keys, e.b.key)
		c.runCleanup(e)
		c.mu.Lock()
		if c.slot(e.b.id) == e {
			c.setSlot(e.b.id, nil)
		}
		e.state.Store(stateEvicted)
		c.mu.Unlock()
		close(e.gone)
	}
	return keys
}

// runCleanup runs the cleanup of e's value once, reporting failures.
func (c *Cache) runCleanup(e *entry) {
	b := e.b
	defer func() {
		if r := recover(); r != nil {
			c.report(b.name, fmt.Errorf("cachepool: cleanup %q: %w", b.name,
				&PanicError{Op: "cleanup", Value: r, Stack: debug.Stack()}))
		}
	}()
	if b.cleanup != nil {
		b.cleanup(e.val)
		return
	}
	if cl, ok := e.val.(io.Closer); ok {
		if err := cl.Close(); err != nil {
			c.report(b.name, fmt.Errorf("cachepool: close %q: %w", b.name, err))
		}
	}
}
