package cachepool

import "time"

// Stats are the counters of one [Cache] since [New] (or since the process
// started, for [Default]). The zero Stats is an unused cache.
type Stats struct {
	// Hits counts the Gets that returned a value without running a build,
	// including those that waited for another caller's build.
	Hits uint64
	// Builds counts the builds that ran, whether they succeeded or not
	// (every Get that found no value and no build in progress).
	Builds uint64
	// Evictions counts the values evicted by Evict, EvictGen, EvictLRU and
	// Clear.
	Evictions uint64
	// Resident is the number of items held now (built and not evicted).
	Resident int
	// Bytes is the sum of the sizes of the resident values, as reported by
	// their items' Size functions; values without Size count 0.
	Bytes int64
	// PeakBytes is the largest Bytes has been.
	PeakBytes int64
	// BuildTime is the wall time spent in the builds that ran, failed ones
	// included.
	BuildTime time.Duration
}

// Stats returns c's counters. It takes c's lock once and does not allocate;
// the figures are consistent with each other except Hits, which is counted
// without the lock.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	s := Stats{
		Builds:    c.builds,
		Evictions: c.evictions,
		Resident:  len(c.resident),
		Bytes:     c.bytes,
		PeakBytes: c.peak,
		BuildTime: c.buildTime,
	}
	c.mu.Unlock()
	s.Hits = c.hits.Load()
	return s
}
