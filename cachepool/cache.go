package cachepool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"runtime/debug"
	"slices"
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
	// The hit path reads table and adds to hits without taking mu. They
	// sit on separate cache lines so that counting hits does not evict the
	// table pointer from other cores' caches.
	table atomic.Pointer[slotTable]
	_     [56]byte
	hits  atomic.Uint64
	_     [56]byte

	onError atomic.Pointer[func(name string, err error)]

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

	// version counts the entries that became ready; EvictGen skips its scan
	// when neither it nor the generation changed since the last scan.
	version     uint64
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
	b     *base
	state atomic.Uint32

	// Written before the state leaves stateBuilding (val, size) or before
	// done is closed (err, retry); read-only afterwards.
	val   any
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
// function that panicked. name is the item's name; err says what happened,
// names the item and, for a panic, matches [ErrPanic] and holds a
// [*PanicError] with the stack. h runs in the goroutine that evicts (or, for
// Size, builds), synchronously; it must not call methods of c that evict.
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
// waiters.
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
		c.resident = append(c.resident, e)
		c.keys = append(c.keys, e.b.key)
		c.bytes += size
		c.peak = max(c.peak, c.bytes)
		c.version++
		e.state.Store(stateReady)
	}
	c.mu.Unlock()
	close(e.done)
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

// Resident returns the keys of the items resident in c, in the order they
// were built. It returns nil when none is.
func (c *Cache) Resident() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.resident) == 0 {
		return nil
	}
	return slices.Clone(c.keys)
}

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
// EvictGen scanned with the same gen and no item has been built since, every
// resident item has already been kept by that set, so EvictGen returns nil
// without calling keep: a worker that checks the window before every job
// pays for a scan only when something changed.
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

func (c *Cache) detach(keep func(uint64) bool) []*entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.detachLocked(keep)
}

func (c *Cache) detachGen(gen uint64, keep func(uint64) bool) (victims []*entry, skipped bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.scanned && c.scanGen == gen && c.scanVersion == c.version {
		return nil, true
	}
	victims = c.detachLocked(keep)
	c.scanned, c.scanGen, c.scanVersion = true, gen, c.version
	return victims, false
}

// detachLocked takes the entries that keep rejects out of the resident
// list and marks them evicting. c.mu must be held. keep runs for every
// entry before anything changes, so a panic in keep leaves c as it was.
func (c *Cache) detachLocked(keep func(uint64) bool) []*entry {
	keys := c.keys
	i := 0
	for i < len(keys) && keep(keys[i]) {
		i++
	}
	if i == len(keys) {
		return nil
	}
	// Evicting from i on. Ask keep about the rest before changing
	// anything; drop marks the victims by index.
	drop := []int{i}
	for j := i + 1; j < len(keys); j++ {
		if !keep(keys[j]) {
			drop = append(drop, j)
		}
	}

	res := c.resident
	victims := make([]*entry, len(drop))
	n, d := i, 0
	for j := i; j < len(res); j++ {
		if d < len(drop) && drop[d] == j {
			victims[d] = res[j]
			d++
			continue
		}
		res[n], keys[n] = res[j], keys[j]
		n++
	}
	clear(res[n:])
	c.resident, c.keys = res[:n], keys[:n]

	for _, e := range victims {
		e.gone = make(chan struct{})
		e.state.Store(stateEvicting)
		c.bytes -= e.size
		c.evictions++
	}
	return victims
}

// cleanUp runs the cleanups of victims, most recently built first, frees
// their slots and releases the Gets waiting for them.
func (c *Cache) cleanUp(victims []*entry) []uint64 {
	keys := make([]uint64, 0, len(victims))
	for i := len(victims) - 1; i >= 0; i-- {
		e := victims[i]
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
