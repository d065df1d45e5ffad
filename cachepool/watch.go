package cachepool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// ErrUndeclared is returned, wrapped with the item's name, by [Item.Get]
// through a cache whose strict [Watch] does not list the item: a job got
// an item that it did not declare.
var ErrUndeclared = errors.New("cachepool: item not declared by the job")

// A Watch notes the items that [Item.Get] returns through a cache (see
// [Cache.SetWatch]) other than a declared set: how a job runner finds the
// items that a job uses without having declared them. Gets made by the
// build of another item do not count (they are that item's business), nor
// do those of declared items. A Watch is safe for concurrent use.
type Watch struct {
	// last is the id of the item the last Get found declared or already
	// noted, so that repeated Gets of one item cost one atomic load.
	last atomic.Int64

	mu       sync.Mutex
	declared []uint64 // sorted
	strict   bool
	found    []Undeclared
}

// An Undeclared item is one that a Get returned although the watch's
// declared set did not list it.
type Undeclared struct {
	Name string
	Key  uint64
	// Family is the prefix of the item's [Family] ("" for an item made
	// by [Define]): a family member's name varies with its parameter.
	Family string
}

// NewWatch returns a watch of the sorted keys declared. A strict watch
// makes the Get of an undeclared item fail with [ErrUndeclared] (noted all
// the same), and the item is not built.
func NewWatch(declared []uint64, strict bool) *Watch {
	w := &Watch{strict: strict}
	w.Reset(declared)
	return w
}

// Strict reports whether the watch fails the Gets of undeclared items.
func (w *Watch) Strict() bool { return w.strict }

// Reset makes w a watch of the sorted keys declared, with nothing found.
func (w *Watch) Reset(declared []uint64) {
	w.mu.Lock()
	w.declared, w.found = declared, w.found[:0]
	w.last.Store(0) // no item has id 0
	w.mu.Unlock()
}

// Found returns the undeclared items that Gets returned since the last
// Reset, each once, in the order of their first Get. The slice is the
// caller's.
func (w *Watch) Found() []Undeclared {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.found)
}

// Got reports whether a Get since the last Reset returned the undeclared
// item of key k.
func (w *Watch) Got(k uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.ContainsFunc(w.found, func(u Undeclared) bool { return u.Key == k })
}

// note is Get's look at item b through a cache that w watches, when b is
// not the last item w saw: it records b if undeclared, and fails the Get
// if w is strict.
func (w *Watch) note(ctx context.Context, b *base) error {
	if frameOf(ctx) != nil {
		return nil // a build's own Get: the item it builds needs b
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := slices.BinarySearch(w.declared, b.key); ok {
		w.last.Store(int64(b.id))
		return nil
	}
	if !slices.ContainsFunc(w.found, func(u Undeclared) bool { return u.Key == b.key }) {
		w.found = append(w.found, Undeclared{Name: b.name, Key: b.key, Family: b.family})
	}
	if w.strict {
		return fmt.Errorf("%w: %q (declare it with the job's function or the job)", ErrUndeclared, b.name)
	}
	w.last.Store(int64(b.id))
	return nil
}

// SetWatch makes w watch the Gets through c, until the next SetWatch; nil
// stops watching. A Get through a cache that nobody watches costs one
// atomic load more than it would without watches.
func (c *Cache) SetWatch(w *Watch) { c.watch.Store(w) }
