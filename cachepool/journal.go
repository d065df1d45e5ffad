package cachepool

import "time"

// A Record is one successful build or one eviction of an item in a
// [Cache], as [Cache.TakeJournal] returns it.
type Record struct {
	// Key is the item's key, [Key](Name); Name is the item's name.
	Key  uint64
	Name string
	// Bytes is the size of the value built or evicted, as the item's
	// [Size] function reported it right after the build; 0 without one.
	Bytes int64
	// Evicted is false for a build and true for an eviction.
	Evicted bool
	// Start and End are when a build began and ended (the build function's
	// run, without the before-build function). For an eviction both are
	// when the eviction took the item out of the resident set, before its
	// cleanup ran.
	Start, End time.Time
}

// journalLimit bounds the records a journal holds between two takes;
// later ones are dropped (and counted by TakeJournal), so that a cache
// whose journal nobody reads cannot grow without bound.
const journalLimit = 1 << 16

// journal is what SetJournal turns on: the records since the last take.
type journal struct {
	records []Record
	dropped int
}

// SetJournal turns c's journal on or off. While it is on, every successful
// build (failed builds are not recorded) and every eviction, by any method
// ([Cache.Evict], [Cache.EvictGen], [Cache.EvictLRU], [Cache.Clear]), adds
// a [Record] that [Cache.TakeJournal] hands out: a worker sends its
// owner the history of its items, not only their count. Records are added
// under c's lock, in the order the builds finished and the evictions
// were decided. Turning it off drops the records not yet taken. The
// journal holds at most some tens of thousands of records between two
// takes; the rest are dropped and counted.
//
// A journal costs a cache with it off one test per build and per
// eviction; hits never look at it.
func (c *Cache) SetJournal(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case on && c.journal == nil:
		c.journal = &journal{}
	case !on:
		c.journal = nil
	}
}

// TakeJournal appends to dst the records of the journal (see
// [Cache.SetJournal]) since the last take, oldest first, empties it, and
// returns the extended slice and the number of records dropped since the
// last take because the journal was full. With the journal off it returns
// dst and 0.
func (c *Cache) TakeJournal(dst []Record) ([]Record, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.journal
	if j == nil {
		return dst, 0
	}
	dst = append(dst, j.records...)
	dropped := j.dropped
	clear(j.records)
	j.records, j.dropped = j.records[:0], 0
	return dst, dropped
}

// record adds r to the journal, if it is on. c.mu is held.
func (c *Cache) record(r Record) {
	j := c.journal
	if j == nil {
		return
	}
	if len(j.records) >= journalLimit {
		j.dropped++
		return
	}
	j.records = append(j.records, r)
}

// recordBuild records the successful build of e that took dur and has
// just ended. c.mu is held.
func (c *Cache) recordBuild(e *entry, dur time.Duration) {
	if c.journal == nil {
		return
	}
	end := time.Now()
	c.record(Record{Key: e.b.key, Name: e.b.name, Bytes: e.size, Start: end.Add(-dur), End: end})
}

// recordEvictions records the eviction of victims, decided now. c.mu is
// held.
func (c *Cache) recordEvictions(victims []*entry) {
	if c.journal == nil {
		return
	}
	now := time.Now()
	for _, e := range victims {
		c.record(Record{Key: e.b.key, Name: e.b.name, Bytes: e.size, Evicted: true, Start: now, End: now})
	}
}
