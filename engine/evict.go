package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/shm"
)

// A worker's eviction runner: before each job it brings its view of the
// window up to the job's generation and applies the pool's policy.

// windowWait bounds how long a worker waits to see the generation a job was
// sent with. On one host the parent publishes before it sends, so the wait
// is a reordering of microseconds; past the bound the worker keeps
// everything for that job rather than evict on an old view.
const windowWait = time.Second

// errWindowBehind is returned by sync when the window did not reach a job's
// generation in time; nothing was evicted.
var errWindowBehind = errors.New("the window did not reach the job's generation in time; nothing evicted")

// runner holds a worker's state between jobs.
type runner struct {
	win    windowView
	cache  *cachepool.Cache
	policy EvictPolicy
	snap   shm.Snapshot
	have   bool // snap is valid
}

// sync brings the worker's view of the window to at least generation gen
// and, under EvictStale, evicts from its cache every item the window no
// longer lists. It returns the number of items evicted.
func (r *runner) sync(gen uint64) (int, error) {
	if !r.have || r.win.Gen() != r.snap.Gen {
		s, err := r.win.Snapshot(r.snap.Keys)
		if err != nil {
			return 0, err
		}
		r.snap, r.have = s, true
	}
	if r.snap.Gen < gen {
		if !r.win.WaitGen(gen, time.Now().Add(windowWait)) {
			return 0, fmt.Errorf("window generation %d, job needs %d: %w", r.win.Gen(), gen, errWindowBehind)
		}
		s, err := r.win.Snapshot(r.snap.Keys)
		if err != nil {
			return 0, err
		}
		r.snap = s
	}
	if r.policy != EvictStale {
		// EvictNever keeps everything; under EvictEachJob the cache was
		// cleared after the previous job (see afterJob).
		return 0, nil
	}
	return len(r.cache.EvictGen(r.snap.Gen, r.snap.Contains)), nil
}

// afterJob applies the policy once a job has returned, whatever its
// outcome: EvictEachJob clears the cache. It returns the number of items
// evicted.
func (r *runner) afterJob() int {
	if r.policy != EvictEachJob {
		return 0
	}
	return len(r.cache.Clear())
}
