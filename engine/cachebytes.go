package engine

import (
	"time"

	"github.com/poolrun/poolrun/cachepool"
)

// The pool's figures of cached bytes, kept as the workers report what they
// hold and as the set of needed items changes: the sum, its peak, the
// stale bytes and their byte-seconds (Stats), without a scan of the
// places per report.

// account brings the memory figures up to now, after the workers' reports
// or the set of needed items changed.
func (s *scheduler) account(now time.Time) {
	if !s.acctAt.IsZero() {
		s.staleSeconds += float64(s.staleBytes) * now.Sub(s.acctAt).Seconds()
	}
	s.acctAt = now
	s.cacheSum, s.staleBytes = s.curSum, s.staleNow
	s.peakSum = max(s.peakSum, s.cacheSum)
}

// A cachedItem is what the workers hold of an item, as last reported: the
// bytes, summed, and the places that hold it.
type cachedItem struct {
	bytes  int64
	places int
}

// setCur records the cache statistics of pl's worker's last report.
func (s *scheduler) setCur(pl *place, st cachepool.Stats) {
	s.curSum += st.Bytes - pl.cur.Bytes
	pl.cur = st
}

// setResident records the resident set pl's worker reported (nil: it holds
// nothing).
func (s *scheduler) setResident(pl *place, rs []residentItem) {
	for k, b := range pl.resident {
		s.uncache(k, b)
	}
	clear(pl.resident)
	if rs == nil {
		pl.resident = nil
		return
	}
	if pl.resident == nil {
		pl.resident = make(map[uint64]int64, len(rs))
	}
	for _, r := range rs {
		if b, ok := pl.resident[r.key]; ok {
			s.uncache(r.key, b)
		}
		pl.resident[r.key] = r.bytes
		s.cache(r.key, r.bytes)
	}
}

// cache counts b bytes of item k held by a worker, and uncache takes them
// off.
func (s *scheduler) cache(k uint64, b int64) {
	c := s.cached[k]
	c.bytes += b
	c.places++
	s.cached[k] = c
	if !s.p.refs.has(k) {
		s.staleNow += b
	}
}

func (s *scheduler) uncache(k uint64, b int64) {
	c := s.cached[k]
	c.bytes -= b
	if c.places--; c.places == 0 {
		delete(s.cached, k)
	} else {
		s.cached[k] = c
	}
	if !s.p.refs.has(k) {
		s.staleNow -= b
	}
}

// needed notes that item k became needed by some unfinished job (yes), or
// needed by none (!yes): the bytes the workers hold of it stop, or start,
// being stale.
func (s *scheduler) needed(k uint64, yes bool) {
	b := s.cached[k].bytes
	if yes {
		b = -b
	}
	s.staleNow += b
}

// cacheBytes sums what the workers' caches held at their last reports.
func (s *scheduler) cacheBytes() int64 { return s.curSum }
