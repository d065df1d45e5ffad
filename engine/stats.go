package engine

import "github.com/poolrun/poolrun/cachepool"

// Stats are a pool's figures, from [Pool.Stats].
type Stats struct {
	// Workers has one entry per worker place, in the order they were made
	// (as the jobs needed workers: see [Workers]).
	Workers []WorkerStats
	// Publishes counts the window publishes that changed a required set,
	// over the pool's windows (one per worker place under EvictStale, one
	// for the pool otherwise); Generation is the highest generation a
	// window reached.
	Publishes  uint64
	Generation uint64
	// PeakCacheBytes is the peak, over the pool's life, of the bytes the
	// workers' caches held together (what the host really needed for
	// items at once), as the workers reported after each job, while idle
	// and at the end. StaleByteSeconds is the integral over time of the
	// bytes they held in items that no unfinished job needed: memory
	// held for nothing. Items count by their Size functions.
	PeakCacheBytes   int64
	StaleByteSeconds float64
	// Counts holds the number of jobs in each status, indexed by Status.
	Counts [numStatuses]int
}

// WorkerStats are the figures of one worker place: the worker process
// that holds it and those that held it before (a worker that dies is
// replaced in its place).
type WorkerStats struct {
	// Index numbers the place from 1. PID is its current (or last) process.
	Index, PID int
	// Host is the host name of a worker that joined from elsewhere
	// (package cluster), as it said when it joined; "" for the pool's own
	// workers, which run on this host (PID is then of this host too).
	Host string
	// Live says that a worker holds the place now: it has answered the
	// handshake and not gone. Progress displays count these.
	Live bool
	// Jobs counts the jobs its processes ran; Restarts the processes that
	// replaced one that died.
	Jobs, Restarts int
	// Evicted counts the items its processes evicted while the pool ran,
	// by the pool's eviction policy: stale items before a job or while
	// idle (EvictStale, EvictPoolWide), or everything after each job
	// (EvictEachJob). BudgetEvicted counts those evicted to stay within
	// the cache budget ([CacheBudget]). Cache.Evictions counts both and the
	// clear at the end of the pool.
	Evicted       uint64
	BudgetEvicted uint64
	// PeakRSS is the largest peak resident memory (VmHWM) of the place's
	// processes, as they reported it when they stopped; 0 where unknown
	// (a process that was killed, a system without /proc). In serial mode
	// it is this process's.
	PeakRSS int64
	// Cache sums the cache statistics of the place's processes (PeakBytes is
	// the largest), as last reported: after every job and at the end.
	Cache cachepool.Stats
}

// Total returns the sum of the workers' figures: jobs, restarts, items
// evicted, peak RSS (the sum of the peaks), and every cache counter. Cache.PeakBytes is the sum of the
// workers' own peaks (what they would hold if their peaks coincided);
// Cache.Bytes and Cache.Resident are what they hold now. Index and PID are 0.
func (s Stats) Total() WorkerStats {
	var t WorkerStats
	for _, w := range s.Workers {
		t.Jobs += w.Jobs
		t.Restarts += w.Restarts
		t.Evicted += w.Evicted
		t.BudgetEvicted += w.BudgetEvicted
		t.PeakRSS += w.PeakRSS
		c := &t.Cache
		c.Hits += w.Cache.Hits
		c.Builds += w.Cache.Builds
		c.Evictions += w.Cache.Evictions
		c.Resident += w.Cache.Resident
		c.Bytes += w.Cache.Bytes
		c.PeakBytes += w.Cache.PeakBytes
		c.BuildTime += w.Cache.BuildTime
	}
	return t
}

// Stats returns the pool's figures; it may be called at any time, from any
// goroutine.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Stats{Counts: p.counts}
	if s := p.sched; s != nil {
		st.Publishes, st.Generation = s.windowFigures()
		st.PeakCacheBytes, st.StaleByteSeconds = s.peakSum, s.staleSeconds
		for _, pl := range s.places {
			st.Workers = append(st.Workers, pl.stats())
		}
	}
	return st
}

// addStats adds the figures of a worker's process to those of the
// processes that held its place before: counters add up, and PeakBytes is
// the larger peak, since those processes did not live at the same time.
func addStats(a, b cachepool.Stats) cachepool.Stats {
	a.Hits += b.Hits
	a.Builds += b.Builds
	a.Evictions += b.Evictions
	a.Resident += b.Resident
	a.Bytes += b.Bytes
	a.PeakBytes = max(a.PeakBytes, b.PeakBytes)
	a.BuildTime += b.BuildTime
	return a
}
