package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/poolrun/poolrun/cachepool"
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

// freeThreshold: once evictions have freed this many bytes of items (by
// their Size functions) since the memory was last handed back, the worker
// makes the Go runtime collect and return it to the system at once,
// rather than when it gets round to it. Smaller evictions cost nothing.
const freeThreshold = 16 << 20

// runner holds a worker's state between jobs. mu serialises its use by the
// serve loop (a job) and the idle evictor.
type runner struct {
	mu     sync.Mutex
	win    windowReader
	cache  *cachepool.Cache
	policy EvictPolicy

	// The last look at the window: every item resident at the cache's
	// version seenVersion was judged against the set of generation
	// seenGen (seen: there was a look). keys and absent are scratch.
	seen        bool
	seenGen     uint64
	seenVersion uint64
	keys        []uint64
	absent      []uint64

	// maxValue bounds an encoded result (MaxValueSize).
	maxValue int
	// budget is the cache budget (0: none); cur is the task at hand, read
	// by the build hook while the job runs; budgetEvicted counts the
	// hook's evictions for the task.
	budget        int64
	cur           *task
	budgetEvicted atomic.Int64
	// busy is set while a job's function runs (for the heartbeat).
	busy atomic.Bool
	// base is the parent of the jobs' contexts.
	base context.Context
	// fn is the function of the last task, named fnName.
	fn     *funcEntry
	fnName string

	// returnMemory: hand freed memory back to the system (worker
	// processes; not serial mode, which shares the parent's heap). freed
	// counts the bytes evicted since it was last handed back.
	returnMemory bool
	freed        int64
	lastBytes    int64 // what the cache held when last looked at
	// windowWarned: the worker said that it could not read the window.
	windowWarned bool
	// watch notes the items a job gets without declaring them (nil: the
	// pool does not ask, LearnItems(false)).
	watch *cachepool.Watch

	// idle tells the idle evictor that the serve loop has begun to wait
	// for a task; waiting is set while it waits (serve's idle flag).
	idle    chan struct{}
	waiting *atomic.Bool

	version  uint64 // the cache's version at the last report of the resident set
	reported bool
	items    []cachepool.Resident

	// journal is takeItems' scratch space; notes are the builds and
	// evictions not yet reported (see items.go). takenVersion is the
	// cache's version before the last take (taken: there was one).
	journal      []cachepool.Record
	notes        []itemNote
	taken        bool
	takenVersion uint64
}

// sync brings the worker's view of the window to at least generation gen
// and, under EvictStale and EvictPoolWide, evicts from its cache every
// item the window no longer lists. It returns the number of items evicted.
// r.mu is held.
//
// When nothing was published since the last look and the cache holds
// what it held then, there is nothing to decide: that costs a load of the
// generation and of the cache's version. Otherwise the window is asked,
// in place, which of the resident items it no longer lists, and those go.
func (r *runner) sync(gen uint64) (int, error) {
	follows := r.policy.followsWindow()
	g := r.win.Gen()
	if g >= gen && follows && r.seen && g == r.seenGen && r.cache.Version() == r.seenVersion {
		return 0, nil
	}
	if g < gen && !r.win.WaitGen(gen, time.Now().Add(windowWait)) {
		return 0, fmt.Errorf("window generation %d, job needs %d: %w", r.win.Gen(), gen, errWindowBehind)
	}
	if !follows {
		// EvictNever keeps everything; under EvictEachJob the cache was
		// cleared after the previous job (see afterJob).
		return 0, nil
	}
	// The version first: an item built after it is judged now or, if it
	// is not among the keys, at the next look, which the version's move
	// sends down this path again.
	v := r.cache.Version()
	r.keys = r.cache.Keys(r.keys[:0])
	absent, g, err := r.win.AppendAbsent(r.absent[:0], r.keys)
	r.absent = absent
	if err != nil {
		return 0, err
	}
	// The generations only grow, and the window was at gen or past it
	// before AppendAbsent read it: the job never runs on an older view.
	r.seen, r.seenGen, r.seenVersion = true, g, v
	if len(absent) == 0 {
		return 0, nil
	}
	keep := func(k uint64) bool { return !slices.Contains(absent, k) }
	if len(absent) > 16 { // many victims: search them, not scan
		slices.Sort(absent)
		keep = func(k uint64) bool { _, found := slices.BinarySearch(absent, k); return !found }
	}
	return r.evicted(func() int { return len(r.cache.Evict(keep)) }), nil
}

// evicted runs an eviction, notes the bytes it freed (against what the
// cache held when last looked at), and hands the memory back to the system
// past freeThreshold. It returns evict's result. When nothing is evicted it
// costs only evict's own time.
func (r *runner) evicted(evict func() int) int {
	n := evict()
	if n == 0 {
		return 0
	}
	now := r.cache.Stats().Bytes
	r.freed += max(0, r.lastBytes-now)
	r.lastBytes = now
	if r.returnMemory && r.freed >= freeThreshold {
		r.freed = 0
		debug.FreeOSMemory()
	}
	return n
}

// afterJob applies the policy once a job has returned, whatever its
// outcome: EvictEachJob clears the cache. It returns the number of items
// evicted. r.mu is held.
func (r *runner) afterJob() int {
	if r.policy != EvictEachJob {
		return 0
	}
	return r.evicted(func() int { return len(r.cache.Clear()) })
}

// beforeBuild is the cache's build hook under a budget: it makes room for
// an item about to be built (lastBytes: its size when last built here, 0 if
// unknown), evicting items the job at hand does not need, in the order the
// parent sent (furthest next use first), then least recently used first.
func (r *runner) beforeBuild(key uint64, lastBytes int64) {
	t := r.cur
	if t == nil {
		return
	}
	if lastBytes == 0 {
		// Never built here: count on the largest item this worker holds.
		r.items = r.cache.Resident(r.items[:0])
		for _, it := range r.items {
			lastBytes = max(lastBytes, it.Bytes)
		}
		clear(r.items)
	}
	target := r.budget - lastBytes
	if r.cache.Stats().Bytes <= target {
		return
	}
	// The job's items: declared, and those it got undeclared so far
	// (LearnItems), which it may still be using.
	needed := func(k uint64) bool {
		return k == key || slices.Contains(t.keys, k) || r.watch != nil && r.watch.Got(k)
	}
	n := 0
	for _, k := range t.order {
		if r.cache.Stats().Bytes <= target {
			break
		}
		if !needed(k) {
			n += len(r.cache.Evict(func(x uint64) bool { return x != k }))
		}
	}
	if r.cache.Stats().Bytes > target {
		n += len(r.cache.EvictLRU(target, needed))
	}
	r.budgetEvicted.Add(int64(n))
}

// report fills rep's resident set when it changed since the last report.
// r.mu is held.
func (r *runner) report(rep *reply) {
	if v := r.cache.Version(); !r.reported || v != r.version {
		r.version, r.reported = v, true
		rep.residentSent, rep.resident = true, r.resident()
	}
}

// resident lists the cache's resident items.
func (r *runner) resident() []residentItem {
	r.items = r.cache.Resident(r.items[:0])
	rs := make([]residentItem, len(r.items))
	for i, it := range r.items {
		rs[i] = residentItem{key: it.Key, bytes: it.Bytes}
	}
	clear(r.items)
	return rs
}

// idleEvict follows the window while the worker waits for a job: when the
// generation moves, it evicts what the window no longer lists and reports
// the new state to the parent. It sleeps on the window only while the
// worker is idle (the serve loop sends on r.idle when it starts to wait);
// while a job runs it waits on that channel instead, holding no thread in
// a system call. It returns when stop is closed.
func (r *runner) idleEvict(wc workerConn, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-r.idle:
		}
		gen := uint64(0) // look at once: the window may have moved during the job
		poll := idlePoll
		if _, ok := r.win.(interface{ Nudge() }); ok {
			poll = idleSleep // serve's end nudges it awake
		}
		for r.waiting.Load() {
			select {
			case <-stop:
				return
			default:
			}
			next := r.win.WaitChange(gen, time.Now().Add(poll))
			if next == gen {
				continue
			}
			gen = next
			if !r.mu.TryLock() {
				break // a job has started: it syncs itself
			}
			n := 0
			if r.seen && r.win.Gen() != r.seenGen {
				n, _ = r.sync(0)
				r.takeItems(EvictedByPolicy)
			}
			var err error
			if n > 0 {
				// Said under r.mu, so that it cannot pass the serve loop's
				// later reports (the bye's statistics above all).
				st := &workerState{evicted: n, stats: r.cache.Stats(), resident: r.resident(), items: r.itemNotes()}
				r.version, r.reported = r.cache.Version(), true
				err = wc.state(st)
			}
			r.mu.Unlock()
			if err != nil {
				return
			}
		}
	}
}

// idlePoll bounds an idle worker's sleep on the window, so that it notices
// the end of its serve loop; idleSleep bounds it on a window that serve's
// end wakes (Nudge, in shared memory): a host of hundreds of idle workers
// then sleeps, where 40 wakings a second each took its cores.
const (
	idlePoll  = 25 * time.Millisecond
	idleSleep = time.Second
)
