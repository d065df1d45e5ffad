package cachepool

import (
	"context"
	"errors"
	"fmt"
	"log"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Cache holds the values built in one process: at most one value per item,
// from its build until its eviction. A worker uses [Default]; tests and
// serial runs may make their own with [New] and hand them to [Item.Get]
// through [WithCache].
//
// All methods are safe for concurrent use. A Cache must not be copied (go
// vet's copylocks check reports copies).
type Cache struct {
	// The hit path reads table and clock and adds to hits without taking
	// mu. They sit on separate cache lines so that counting hits does not
	// evict the table pointer or the clock from other cores' caches.
	table atomic.Pointer[slotTable]
	_     [56]byte
	hits  atomic.Uint64
	_     [56]byte
	// clock is the use clock of Resident.LastUse. It advances when a Get
	// returns the value of an entry other than the one whose lastUse holds
	// the clock's reading (see touch), so repeated hits of one item write
	// nothing.
	clock atomic.Uint64
	_     [56]byte

	watch       atomic.Pointer[Watch] // see SetWatch
	onError     atomic.Pointer[func(name string, err error)]
	beforeBuild atomic.Pointer[func(key uint64, lastBytes int64)]

	// version changes, under mu, whenever the resident set does: an entry
	// becomes ready, or entries are detached for eviction. Version reads
	// it without mu.
	version atomic.Uint64

	// mu guards the fields below, the slots of every table (writes only;
	// reads are atomic) and the state transitions of entries.
	mu        sync.Mutex
	resident  []*entry // the entries in stateReady, in the order they were built
	keys      []uint64 // keys[i] is resident[i].b.key: the eviction scan reads only this
	builds    uint64
	evictions uint64
	bytes     int64
	peak      int64
	buildTime time.Duration

	// lastBytes[id] is the size of the last successful build of the item
	// with that id in this cache, kept after its eviction for the
	// before-build function.
	lastBytes []int64
	// lru is EvictLRU's scratch space, kept between calls.
	lru []lruCandidate
	// journal records builds and evictions while SetJournal has it on;
	// nil when it is off.
	journal *journal

	// EvictGen skips its scan when neither the generation nor version
	// changed since the last scan.
	scanned     bool
	scanGen     uint64
	scanVersion uint64
}

// slotTable maps item ids to the entry of this cache, if any. It only
// grows: a larger table replaces it, and lock-free readers that still hold
// the old one see stale slots, which is harmless because they check the
// entry's own state and fall back to the locked path.
type slotTable struct {
	slots []atomic.Pointer[entry]
}

// Entry states. An entry only moves forward: building, then ready or failed;
// ready, then evicting, then evicted. A new build of the same item makes a
// new entry.
const (
	stateBuilding uint32 = iota
	stateReady
	stateFailed
	stateEvicting
	stateEvicted
)

// entry is one build of one item in one cache.
type entry struct {
	// A hit reads state, val and lastUse; it writes lastUse when the
	// cache's latest use was of another entry (see Cache.touch).
	state atomic.Uint32
	// Written before the state leaves stateBuilding (val, size) or before
	// done is closed (err, retry); read-only afterwards.
	val any

	// Keeps lastUse off the cache line of state and val, so that a hit
	// that writes it does not take that line from the cores that read
	// this entry, whatever the entry's alignment.
	_ [64]byte

	// lastUse is the reading of the cache's clock that orders this entry
	// among the others by their latest use (see Cache.touch).
	lastUse atomic.Uint64

	b     *base
	size  int64
	err   error
	retry bool // the build failed because its caller's ctx ended

	done chan struct{} // closed when the build has finished, either way
	gone chan struct{} // made on eviction; closed when the cleanup has run
}

var defaultCache = New()

// New returns an empty cache.
func New() *Cache {
	return &Cache{}
}

// Default returns the process-wide cache: the one [Item.Get] uses when its
// context carries no other, and the one a poolrun worker evicts from.
func Default() *Cache {
	return defaultCache
}

type cacheKey struct{}

// WithCache returns a copy of ctx that carries c, so that [Item.Get] with the
// result (or a context derived from it) uses c. A nil c stands for [Default].
func WithCache(ctx context.Context, c *Cache) context.Context {
	return context.WithValue(ctx, cacheKey{}, c)
}

// FromContext returns the cache carried by ctx (see [WithCache]), else
// [Default].
func FromContext(ctx context.Context) *Cache {
	if c, _ := ctx.Value(cacheKey{}).(*Cache); c != nil {
		return c
	}
	return defaultCache
}

// SetErrorHandler makes h receive the failures that c cannot return to
// anyone: a cleanup that panicked, an io.Closer whose Close failed, a Size
// or before-build function (see [Cache.SetBeforeBuild]) that panicked. name
// is the item's name; err says what happened, names the item and, for a
// panic, matches [ErrPanic] and holds a [*PanicError] with the stack. h runs
// in the goroutine that evicts (or, for Size and before-build, builds),
// synchronously; it must not call methods of c that evict.
//
// The default handler, restored by a nil h, writes err (and, for a panic,
// the stack) with the log package's standard logger, which writes to
// standard error unless the program redirected it.
func (c *Cache) SetErrorHandler(h func(name string, err error)) {
	if h == nil {
		c.onError.Store(nil)
		return
	}
	c.onError.Store(&h)
}

func (c *Cache) report(name string, err error) {
	if h := c.onError.Load(); h != nil {
		(*h)(name, err)
		return
	}
	var pe *PanicError
	if errors.As(err, &pe) {
		log.Printf("%v\n%s", err, pe.Stack)
		return
	}
	log.Print(err)
}

// SetBeforeBuild makes fn run before every build in c, so that a caller
// that holds c to a memory budget can make room first. nil removes it.
//
// fn(key, lastBytes) runs once a Get has decided to build (the item is
// neither resident nor being built in c), in that Get's goroutine, without
// c's lock, before the item's build function starts; the build runs after
// fn returns. key is the item's key. lastBytes is the size (see [Size]) of
// the item's last successful build in c, whether or not it has been evicted
// since: an estimate of what the build will add. It is 0 when the item has
// never been built in c or has no Size.
//
// fn may call the methods of c, [Cache.EvictLRU] among them: the item about
// to be built is not resident and no eviction touches it. fn must not call
// [Item.Get], on c or any other cache: a Get of the item being built would
// wait for its own build. fn runs concurrently for builds in different
// goroutines, and runs for the builds of the items that a build Gets while
// its own build is in progress; an eviction by fn then may take items
// that the outer build already holds, unless its keep function spares them.
//
// A panic in fn is recovered and reported to the error handler (see
// [Cache.SetErrorHandler]) as a [*PanicError] with Op "before build"; the
// build goes ahead. fn's time does not count in [Stats.BuildTime]. A hit
// does not look at fn; a build pays one atomic load for it, and the call.
func (c *Cache) SetBeforeBuild(fn func(key uint64, lastBytes int64)) {
	if fn == nil {
		c.beforeBuild.Store(nil)
		return
	}
	c.beforeBuild.Store(&fn)
}

// runBeforeBuild calls the function set by SetBeforeBuild, if any, for b,
// reporting a panic. It reports whether there was one to call.
func (c *Cache) runBeforeBuild(b *base, lastBytes int64) bool {
	fn := c.beforeBuild.Load()
	if fn == nil {
		return false
	}
	defer func() {
		if r := recover(); r != nil {
			c.report(b.name, fmt.Errorf("cachepool: before build %q: %w", b.name,
				&PanicError{Op: "before build", Value: r, Stack: debug.Stack()}))
		}
	}()
	(*fn)(b.key, lastBytes)
	return true
}

// slot returns the entry of the item with the given id, without locking.
func (c *Cache) slot(id int) *entry {
	t := c.table.Load()
	if t == nil || uint(id) >= uint(len(t.slots)) {
		return nil
	}
	return t.slots[id].Load()
}

// setSlot sets the entry of the item with the given id. c.mu must be held.
func (c *Cache) setSlot(id int, e *entry) {
	t := c.table.Load()
	if t == nil || id >= len(t.slots) {
		if e == nil {
			return
		}
		old := 0
		if t != nil {
			old = len(t.slots)
		}
		nt := &slotTable{slots: make([]atomic.Pointer[entry], max(2*old, id+1, 64))}
		for i := 0; i < old; i++ {
			nt.slots[i].Store(t.slots[i].Load())
		}
		c.table.Store(nt)
		t = nt
	}
	t.slots[id].Store(e)
}

// sizeOf runs the item's Size function on v, reporting a panic as size 0.
func (c *Cache) sizeOf(b *base, v any) (n int64) {
	if b.size == nil {
		return 0
	}
	defer func() {
		if r := recover(); r != nil {
			n = 0
			c.report(b.name, fmt.Errorf("cachepool: size of %q: %w", b.name,
				&PanicError{Op: "size", Value: r, Stack: debug.Stack()}))
		}
	}()
	return b.size(v)
}

// finishBuild publishes the outcome of the build of e and releases its
// waiters. A successful build counts as a use of the value by the Get that
// ran it.
func (c *Cache) finishBuild(e *entry, val any, size int64, dur time.Duration, err error, retry bool) {
	c.mu.Lock()
	c.builds++
	c.buildTime += dur
	if err != nil {
		e.err = err
		e.retry = retry
		e.state.Store(stateFailed)
		c.setSlot(e.b.id, nil)
	} else {
		e.val = val
		e.size = size
		e.lastUse.Store(c.clock.Add(1))
		c.resident = append(c.resident, e)
		c.keys = append(c.keys, e.b.key)
		c.bytes += size
		c.peak = max(c.peak, c.bytes)
		if id := e.b.id; id >= len(c.lastBytes) {
			c.lastBytes = append(c.lastBytes, make([]int64, id+1-len(c.lastBytes))...)
		}
		c.lastBytes[e.b.id] = size
		c.recordBuild(e, dur)
		c.version.Add(1)
		e.state.Store(stateReady)
	}
	c.mu.Unlock()
	close(e.done)
}

// touch records a Get that returns e's value as e's latest use. When e's
// lastUse holds the clock's reading, e was the entry of the latest use and
// nothing changes; else the clock advances and e takes the new reading.
// Either way e then holds the largest reading, and the order of the entries
// by lastUse is the order of their latest Gets; repeated hits of one item
// cost two loads and no write.
func (c *Cache) touch(e *entry) {
	if e.lastUse.Load() != c.clock.Load() {
		e.lastUse.Store(c.clock.Add(1))
	}
}

// lastBytesLocked returns the size of the last successful build of the item
// with the given id in c, or 0. c.mu must be held.
func (c *Cache) lastBytesLocked(id int) int64 {
	if id < len(c.lastBytes) {
		return c.lastBytes[id]
	}
	return 0
}
