package shm

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultCapacity is the number of key slots of a window created with a
// capacity of 0 or less.
const DefaultCapacity = 1000

// DefaultStallTimeout is how long [Window.Snapshot] waits on a sequence that
// stays odd before it reports [ErrWriterStalled].
const DefaultStallTimeout = 50 * time.Millisecond

// createFileHook makes the backing file; tests swap it for the fallback.
var createFileHook = createFile

// maxCapacity bounds the capacity a header may claim, so that a corrupt
// header cannot make Open compute an absurd size.
const maxCapacity = 1 << 24

// A Window is a fixed-capacity set of uint64 keys in a shared memory mapping,
// written by one process ([Create]) and read by any number of others ([Open]).
//
// The methods of a Window are safe for concurrent use by multiple goroutines.
type Window struct {
	writable bool
	capacity int
	file     *os.File // the descriptor the window was created or opened with
	roFile   *os.File // writer: a read-only descriptor of the same file, for children
	mapping  []byte
	h        header

	// life guards the mapping against Close for the methods that write to
	// it (Publish) or sleep on it (WaitGen): they hold it shared, Close
	// holds it exclusively while it retires the pages. The reads (Gen,
	// Snapshot, AppendAbsent) take no lock: they load closing after they
	// read (see Close).
	life   sync.RWMutex
	closed bool

	// closing is set by Close before it takes life, so that the goroutines
	// sleeping in WaitGen, which hold life shared, return, and so that a
	// read that overlapped Close does not return what it read; waiting
	// counts the sleepers (in this process only: readers cannot write to
	// the mapping).
	closing atomic.Bool
	waiting atomic.Int64
	nudges  atomic.Uint64 // Nudge calls: a WaitGen that sees it move returns
	// local wakes the goroutines waiting in WaitGen on the writer's own
	// window, which wait in the Go scheduler (see WaitGen).
	local localWake

	// Writer state, guarded by wmu: the set the mapping holds, sorted.
	wmu      sync.Mutex
	cur      []uint64
	overflow bool
	scratch  []uint64
	publish  atomic.Uint64 // number of publishes that changed the set

	stallNanos atomic.Int64
	retries    atomic.Uint64
}

// mappingSize is the length of the file and mapping of a window of the given
// capacity: the header page and the slots, rounded up to whole pages.
func mappingSize(capacity int) int {
	page := os.Getpagesize()
	n := headerSize + 8*capacity
	return (n + page - 1) / page * page
}

// Create makes a new, empty window with room for capacity keys
// ([DefaultCapacity] if capacity <= 0), mapped read-write for the calling
// process, the only one that may [Window.Publish] to it.
//
// The backing file is an anonymous memory file where the system has one
// (memfd on Linux), otherwise a file created exclusively with mode 0600 in
// [os.TempDir] and unlinked at once, before it is even sized. Either way nothing is
// left on disk once every process that holds it has exited, however it ended.
// Hand [Window.File] to the processes that read the window.
func Create(capacity int) (*Window, error) {
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	if capacity > maxCapacity {
		return nil, fmt.Errorf("shm: capacity %d exceeds the maximum of %d", capacity, maxCapacity)
	}
	size := mappingSize(capacity)
	f, err := createFileHook(size)
	if err != nil {
		return nil, err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("shm: mapping %s: %w", f.Name(), err)
	}
	w := &Window{writable: true, capacity: capacity, file: f, mapping: m, h: mapHeader(m, capacity)}
	w.stallNanos.Store(int64(DefaultStallTimeout))
	w.h.capacity.Store(uint64(capacity))
	w.h.version.Store(layoutVersion)
	w.h.magic.Store(magicNumber) // last: a reader that sees the magic sees the rest
	w.roFile = reopenReadOnly(f)
	w.cur = make([]uint64, 0, capacity)
	return w, nil
}

// Open maps the window behind f, typically a descriptor inherited from the
// process that created it, read-only: a write through the mapping faults.
// Open checks the header field by field (magic number, then layout version,
// then capacity and size). It refuses a file too short for a header, a wrong
// magic number, an impossible capacity, or a size that does not match the
// capacity with an error wrapping [ErrCorrupt] that names the field; and a
// window of a layout version this build does not read (the magic number is
// right, the version is not) with one wrapping [ErrVersion].
//
// Open does not take ownership of f: the caller may close it once Open has
// returned (the mapping stays valid), and [Window.Close] does not close it.
func Open(f *os.File) (*Window, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("shm: %s: %w", f.Name(), err)
	}
	size := st.Size()
	if size < headerSize {
		return nil, fmt.Errorf("%w: %s: size %d is smaller than the %d-byte header", ErrCorrupt, f.Name(), size, headerSize)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: mapping %s: %w", f.Name(), err)
	}
	h := mapHeader(m, 0)
	fail := func(sentinel error, format string, args ...any) (*Window, error) {
		unix.Munmap(m)
		return nil, fmt.Errorf("%w: %s: "+format, append([]any{sentinel, f.Name()}, args...)...)
	}
	if got := h.magic.Load(); got != magicNumber {
		return fail(ErrCorrupt, "magic is %#x, want %#x", got, magicNumber)
	}
	if got := h.version.Load(); got != layoutVersion {
		return fail(ErrVersion, "layout version is %d, this build reads version %d", got, layoutVersion)
	}
	c := h.capacity.Load()
	if c == 0 || c > maxCapacity {
		return fail(ErrCorrupt, "capacity is %d, want 1 to %d", c, maxCapacity)
	}
	if want := mappingSize(int(c)); size != int64(want) {
		return fail(ErrCorrupt, "size is %d bytes, want %d for capacity %d", size, want, c)
	}
	w := &Window{capacity: int(c), mapping: m, h: mapHeader(m, int(c))}
	w.stallNanos.Store(int64(DefaultStallTimeout))
	return w, nil
}

// File returns a descriptor of the window's file to hand to a reader process,
// for example in [os/exec.Cmd.ExtraFiles]. For a window made by [Create] it
// is opened read-only where the system allows it, so a child cannot even
// remap the window writable. The Window keeps ownership: do not close it.
func (w *Window) File() *os.File {
	if w.roFile != nil {
		return w.roFile
	}
	return w.file
}

// Capacity returns the number of key slots.
func (w *Window) Capacity() int { return w.capacity }

// Writable reports whether this process may publish (it created the window).
func (w *Window) Writable() bool { return w.writable }

// Gen returns the current generation: the seqlock sequence, which is even
// when no publish is under way and grows by 2 with each publish that changes
// the set. It returns 0 after Close.
//
// Gen takes no lock and costs two atomic loads, so that a reader can tell
// that nothing was published since its last look (the generation it saw
// then is still there) for the price of a comparison. It may run
// concurrently with Close: the mapping stays readable until the Window is
// unreachable (see Close), and Gen then returns 0 or the generation.
func (w *Window) Gen() uint64 {
	if w.closing.Load() {
		return 0
	}
	return w.h.seq.Load()
}

// Publishes returns the number of publishes that changed the set, in this
// process (the writer's count; 0 in a reader).
func (w *Window) Publishes() uint64 { return w.publish.Load() }

// Retries returns how many times snapshots in this process had to read
// again because a publish was under way.
func (w *Window) Retries() uint64 { return w.retries.Load() }

// SetStallTimeout sets how long [Window.Snapshot] waits for a sequence that
// stays odd before it reports [ErrWriterStalled]; d <= 0 restores
// [DefaultStallTimeout]. A writer that keeps publishing is never taken for a
// stalled one, however long it keeps the reader retrying.
func (w *Window) SetStallTimeout(d time.Duration) {
	if d <= 0 {
		d = DefaultStallTimeout
	}
	w.stallNanos.Store(int64(d))
}

// Publish replaces the window's set of keys with keys, in any order and with
// duplicates allowed (they are sorted and deduplicated; keys itself is not
// modified), and returns the window's generation afterwards.
//
// Publishing the set the window already holds changes nothing and returns the
// current generation. A key of 0 is refused with [ErrZeroKey] and nothing is
// published. When there are more distinct keys than slots, the window is
// marked overflowed (readers then keep everything), the generation moves on,
// and the error wraps [ErrOverflow]; the next set that fits clears the mark.
//
// A publish that changes the set wakes every goroutine of every process
// waiting in [Window.WaitGen]. That costs one system call (a futex wake, on
// Linux) even when nobody waits: readers map the window read-only, so they
// cannot record that they wait anywhere the writer could look first.
//
// Only the window's creator may publish ([ErrReadOnly] otherwise). Calls are
// serialised; each costs one atomic store per slot that changed, and the
// wake when the set changed.
func (w *Window) Publish(keys []uint64) (gen uint64, err error) {
	return w.publishAt(keys, 0)
}

// PublishAt publishes keys as Publish does, and sets the generation to gen,
// which must be even and greater than the current generation
// ([ErrGeneration] otherwise; nothing is published): for a window that
// mirrors one published elsewhere, with that one's generations, so that a
// job stamped there waits here for the same set. An unchanged set moves
// the generation too (and wakes the waiters).
func (w *Window) PublishAt(keys []uint64, gen uint64) (uint64, error) {
	if gen == 0 || gen%2 != 0 {
		return 0, fmt.Errorf("%w: %d is not an even generation above 0", ErrGeneration, gen)
	}
	return w.publishAt(keys, gen)
}

// publishAt is Publish, with the generation set to at if at is not 0.
func (w *Window) publishAt(keys []uint64, at uint64) (gen uint64, err error) {
	if !w.writable {
		return 0, ErrReadOnly
	}
	w.life.RLock()
	defer w.life.RUnlock()
	if w.closed {
		return 0, ErrClosed
	}
	w.wmu.Lock()
	defer w.wmu.Unlock()

	next := append(w.scratch[:0], keys...)
	if !slices.IsSorted(next) {
		slices.Sort(next)
	}
	next = slices.Compact(next)
	if len(next) > 0 && next[0] == 0 {
		w.scratch = next
		return w.h.seq.Load(), ErrZeroKey
	}
	if seq := w.h.seq.Load(); at != 0 && at <= seq {
		w.scratch = next
		return seq, fmt.Errorf("%w: %d, the window is at %d", ErrGeneration, at, seq)
	}
	over := len(next) > w.capacity
	if at == 0 && over == w.overflow && slices.Equal(next, w.cur) {
		w.scratch = next
		gen = w.h.seq.Load()
		if over {
			err = fmt.Errorf("%w: %d keys, %d slots", ErrOverflow, len(next), w.capacity)
		}
		return gen, err
	}

	seq := w.h.seq.Load()
	w.h.seq.Store(seq + 1) // odd: write under way
	if over {
		w.h.overflow.Store(1)
		w.h.count.Store(0)
	} else {
		// Only slots whose content changes are stored: the writer knows what
		// the mapping holds (w.cur, unless it was overflowed and emptied).
		old := w.cur
		if w.overflow {
			old = nil
		}
		for i, k := range next {
			if i >= len(old) || old[i] != k {
				w.h.slots[i].Store(k)
			}
		}
		w.h.count.Store(uint64(len(next)))
		if w.overflow {
			w.h.overflow.Store(0)
		}
	}
	gen = seq + 2
	if at != 0 {
		gen = at
	}
	w.h.seq.Store(gen) // even: readers may use what they read
	// After the store, never before: a waiter that reads the sequence before
	// this store is asleep in the kernel, or about to fail the kernel's
	// comparison with the word, by the time the wake looks for it (see
	// WaitGen). Nothing in the header counts the waiters, so the wake is
	// unconditional: with a count, the writer would have to read it after
	// this store and a waiter increment it before its last look at the
	// sequence, but a reader's mapping is read-only and cannot hold one.
	wakeAll(w.h.genWord)
	w.local.broadcast()

	w.publish.Add(1)
	w.scratch = w.cur
	w.cur = next
	w.overflow = over
	if over {
		err = fmt.Errorf("%w: %d keys, %d slots", ErrOverflow, len(next), w.capacity)
	}
	return gen, err
}

// Snapshot copies the window's current set into dst (reusing its storage when
// it has room, so a reader that passes back the previous snapshot's Keys does
// not allocate) and returns it with its generation.
//
// The copy is consistent: it is exactly one published set, never a mixture
// of two (see [Window.AppendAbsent] for the seqlock that makes it so).
//
// A sequence that stays odd for longer than the stall timeout (see
// [Window.SetStallTimeout]) gives [ErrWriterStalled]; a writer that keeps
// publishing only makes the reader retry.
func (w *Window) Snapshot(dst []uint64) (Snapshot, error) {
	gen, over, err := w.read(func(n int, _ bool) {
		if cap(dst) < n {
			dst = make([]uint64, n, w.capacity)
		}
		dst = dst[:n]
		for i := range dst {
			dst[i] = w.h.slots[i].Load()
		}
	})
	if err != nil {
		return Snapshot{}, err
	}
	return Snapshot{Gen: gen, Keys: dst, Overflow: over}, nil
}

// AppendAbsent appends to dst those of keys that the window's current set
// does not list, in the order of keys, and returns the extended slice with
// the generation of that set. It decides in place, without a copy of the
// set: one binary search of the slots per key. When the window is
// overflowed no key is absent (every key must be taken as present). It
// does not allocate when dst has room for every key.
//
// It is what a reader does before each job to decide which of its items
// to evict: keys are the items it holds, and the answer is what the
// window no longer lists.
//
// The answer is consistent: it comes from exactly one published set. It
// is made under the seqlock: load the sequence, then the count, the
// overflow mark and the slots the searches visit, then the sequence again,
// and retry unless both loads saw the same even value. The writer stores
// an odd sequence before its first slot and the even one after its last.
// All accesses are sync/atomic operations, which the Go memory model makes
// sequentially consistent: so if a load of the reader saw any store of a
// publish, the reader's second load of the sequence comes after that
// publish's odd store in the one order of all atomic operations, and sees
// it or a later value; if both loads saw the same even value, no publish
// wrote between them, and every slot loaded is the one that publish left.
// The writer's final (even) store is synchronised before the reader's
// load that observes it, so the set it completed is visible whole.
//
// A sequence that stays odd for longer than the stall timeout (see
// [Window.SetStallTimeout]) gives [ErrWriterStalled]; a writer that keeps
// publishing only makes the reader retry.
func (w *Window) AppendAbsent(dst, keys []uint64) ([]uint64, uint64, error) {
	out := dst
	gen, _, err := w.read(func(n int, over bool) {
		out = dst // a retry starts again
		if over {
			return
		}
		for _, k := range keys {
			if !w.h.search(n, k) {
				out = append(out, k)
			}
		}
	})
	if err != nil {
		return dst, 0, err
	}
	return out, gen, nil
}

// read runs load under the seqlock until one run of it saw a single
// published set: it loads the sequence, the count and the overflow mark,
// calls load with the count (bounded by the capacity) and the mark, and
// loads the sequence again; it retries unless both loads of the sequence
// saw the same even value. load must read the slots with atomic loads
// only, and may run any number of times. It returns the generation and
// the mark of the set that load last saw, or [ErrClosed] if Close began
// before the read ended (see Close).
func (w *Window) read(load func(count int, overflow bool)) (gen uint64, overflow bool, err error) {
	var (
		stuckSeq   uint64
		stuckSince time.Time
		spins      int
	)
	for {
		s1 := w.h.seq.Load()
		if s1&1 == 0 {
			n := w.h.count.Load()
			over := w.h.overflow.Load() != 0
			if n <= uint64(w.capacity) {
				load(int(n), over)
			}
			if w.h.seq.Load() == s1 {
				if w.closing.Load() {
					return 0, false, ErrClosed
				}
				if n > uint64(w.capacity) {
					return 0, false, fmt.Errorf("%w: count %d exceeds capacity %d", ErrCorrupt, n, w.capacity)
				}
				return s1, over, nil
			}
		}
		w.retries.Add(1)
		// A write is under way (or finished while we read). Spin briefly, then
		// yield, and measure time only on a sequence that does not move.
		spins++
		if spins < 64 {
			continue
		}
		if s1&1 == 1 {
			now := time.Now()
			if s1 != stuckSeq || stuckSince.IsZero() {
				stuckSeq, stuckSince = s1, now
			} else if now.Sub(stuckSince) > time.Duration(w.stallNanos.Load()) {
				return 0, false, fmt.Errorf("%w: sequence %d unchanged for %v", ErrWriterStalled, s1, now.Sub(stuckSince).Round(time.Millisecond))
			}
			if spins > 256 {
				time.Sleep(50 * time.Microsecond)
				continue
			}
		}
		runtime.Gosched()
	}
}

// Close releases the window's mapping and, for the writer, closes its file;
// the memory is released when the last process holding it exits or closes
// it. Close wakes the goroutines of this process waiting in
// [Window.WaitGen], which return [ErrClosed], and waits for the publishes
// under way in other goroutines; a [Window.Snapshot] or
// [Window.AppendAbsent] that overlaps Close returns [ErrClosed] or what
// it read before; later calls return [ErrClosed] (Gen returns 0).
// Closing twice is harmless.
//
// The addresses of the mapping are not unmapped at once: Close puts zero
// pages in their place, which nothing backs, and unmaps those once the
// Window is unreachable. That is what lets the reads take no lock: one
// that overlaps Close can never touch an unmapped page. What it read from
// the zero pages (an empty set) is never returned: Close marks the window
// closing before it replaces the pages, and a reader that read a zero page
// took a page fault to map it, which the kernel served only once the
// replacement was in place; so the reader's load of the mark, after its
// read, sees it.
func (w *Window) Close() error {
	w.closing.Store(true)
	w.wakeWaiters()
	w.life.Lock()
	defer w.life.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	m := w.mapping
	var err error
	if rerr := retire(m); rerr != nil {
		// The window's own pages stay mapped, and readable, until the
		// cleanup below unmaps them.
		err = fmt.Errorf("shm: releasing the mapping: %w", rerr)
	}
	runtime.AddCleanup(w, func(m []byte) { unix.Munmap(m) }, m)
	w.mapping = nil
	if w.roFile != nil {
		w.roFile.Close()
	}
	if w.writable {
		if cerr := w.file.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
