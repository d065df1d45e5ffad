package cachepool

import (
	"context"
	"fmt"
	"reflect"
	"runtime/debug"
	"time"
)

// Item is a named, expensive value that is built on first use in each process
// and memoised in a [Cache] until it is evicted. Make one with [Define] (or
// [Family.Item]); the zero Item is not usable.
//
// An *Item is safe for concurrent use and is a [Handle].
type Item[T any] struct {
	base
	build func(ctx context.Context) (T, error)
}

// Define makes and registers the item called name, whose value build makes.
// Call it from a package-level var declaration, so that every process
// running the same binary (the parent and each re-executed worker) holds the
// same definitions before it serves a job:
//
//	var atlas = cachepool.Define("atlas", loadAtlas, cachepool.Size(atlasBytes))
//
// Define panics, naming both definitions, when an item with the same name or
// the same [Key] is already registered; it also panics when name is empty,
// build is nil, or an option does not fit T. The options are [Cleanup] and
// [Size].
func Define[T any](name string, build func(ctx context.Context) (T, error), opts ...Option) *Item[T] {
	if name == "" {
		panic("cachepool: Define: empty item name")
	}
	if build == nil {
		panic(fmt.Sprintf("cachepool: Define %q: nil build function", name))
	}
	o := parseOptions[T]("Define "+fmt.Sprintf("%q", name), opts, nil)
	it := newItem(name, callerSite(1), o, build)
	reg.add(&it.base)
	return it
}

func newItem[T any](name, site string, o itemOptions, build func(context.Context) (T, error)) *Item[T] {
	it := &Item[T]{
		base: base{
			name:    name,
			key:     Key(name),
			site:    site,
			typ:     typeName[T](),
			cleanup: o.cleanup,
			size:    o.size,
		},
		build: build,
	}
	it.handle = it
	return it
}

// Name returns the item's name, as given to [Define] (for a family member:
// the family's prefix, ":" and the member's parameter).
func (it *Item[T]) Name() string { return it.name }

// Key returns [Key](it.Name()), the item's key in the shared window.
func (it *Item[T]) Key() uint64 { return it.key }

// String returns the item's name.
func (it *Item[T]) String() string { return it.name }

// Get returns the item's value from the [Cache] carried by ctx (see
// [WithCache]), or from [Default] when ctx carries none, building it first
// when it is not resident.
//
// Concurrent callers of a missing item wait for a single build, which runs
// in the goroutine of the first caller with that caller's ctx; while
// waiting, a caller gives up when its own ctx is done. A build that returns
// an error is not memoised: Get returns the error wrapped with the item's
// name (so do the callers that waited for it), and the next Get builds
// again. A caller that waited for a build that failed because the first
// caller's ctx ended builds again itself when its own ctx is still live. A
// build that panics is turned into an error the same way; it matches
// [ErrPanic]. A Get from within the item's own build (directly or through
// other items) returns [ErrCycle] instead of waiting forever.
//
// A Get that starts after [Cache.Evict] has removed the item never returns
// the evicted value: it waits for the cleanup to finish and builds a fresh
// one. A value that Get has returned stays valid until the item is next
// evicted; poolrun's engine evicts only between jobs.
//
// Every Get that returns a value records it as the item's last use (see
// [Resident.LastUse]). When the cache has a before-build function
// ([Cache.SetBeforeBuild]), a Get that builds calls it first.
//
// Through a cache that a [Watch] watches (a poolrun worker's, while a job
// runs), a Get of an item that the job did not declare is noted there,
// and fails with [ErrUndeclared] if the watch is strict.
//
// A hit costs one context lookup, six atomic loads and an atomic add (and,
// under a watch, a look at the watch when the item is not the one it last
// saw); it does not allocate. A hit of another item than the cache's latest Get
// returned also advances the cache's use clock: one more atomic add and an
// atomic store.
func (it *Item[T]) Get(ctx context.Context) (T, error) {
	c := FromContext(ctx)
	if w := c.watch.Load(); w != nil && w.last.Load() != int64(it.id) {
		if err := w.note(ctx, &it.base); err != nil {
			var zero T
			return zero, err
		}
	}
	if e := c.slot(it.id); e != nil && e.state.Load() == stateReady {
		c.hits.Add(1)
		c.touch(e)
		v, _ := e.val.(T) // comma-ok: a nil interface value is stored as nil
		return v, nil
	}
	return it.getSlow(ctx, c)
}

func (it *Item[T]) getSlow(ctx context.Context, c *Cache) (T, error) {
	var zero T
	if it.build == nil {
		panic("cachepool: Get on an Item not made by Define or Family.Item")
	}
	for {
		c.mu.Lock()
		e := c.slot(it.id)
		if e == nil {
			e = &entry{b: &it.base, done: make(chan struct{})}
			c.setSlot(it.id, e)
			lastBytes := c.lastBytesLocked(it.id)
			c.mu.Unlock()
			return it.run(ctx, c, e, lastBytes)
		}
		switch e.state.Load() {
		case stateReady:
			c.mu.Unlock()
			c.hits.Add(1)
			c.touch(e)
			v, _ := e.val.(T)
			return v, nil

		case stateBuilding:
			c.mu.Unlock()
			if inBuild(ctx, c, &it.base) {
				return zero, fmt.Errorf("cachepool: get %q: %w", it.name, ErrCycle)
			}
			select {
			case <-e.done:
			case <-ctx.Done():
				return zero, fmt.Errorf("cachepool: get %q: waiting for its build: %w", it.name, context.Cause(ctx))
			}
			if e.err != nil {
				if e.retry && ctx.Err() == nil {
					continue // the builder gave up, not the build: try ourselves
				}
				return zero, e.err
			}
			// Built. Loop to re-check the state rather than return the
			// value directly: an eviction may have come in between, and
			// then the value has been (or is being) cleaned up.

		case stateEvicting:
			gone := e.gone
			c.mu.Unlock()
			select {
			case <-gone:
			case <-ctx.Done():
				return zero, fmt.Errorf("cachepool: get %q: waiting for its cleanup: %w", it.name, context.Cause(ctx))
			}

		default:
			c.mu.Unlock()
			panic(fmt.Sprintf("cachepool: internal error: entry of %q in state %d", it.name, e.state.Load()))
		}
	}
}

// run builds the value of e, which the caller has just put in c's slot table
// in state stateBuilding, and publishes the outcome. lastBytes is the size
// of the item's last successful build in c, for the before-build function.
func (it *Item[T]) run(ctx context.Context, c *Cache, e *entry, lastBytes int64) (v T, err error) {
	start := time.Now()
	finished := false
	defer func() {
		if !finished {
			// The build (or the before-build function) called
			// runtime.Goexit: nothing else skips the code below.
			// Release the waiters and forget the entry.
			c.finishBuild(e, nil, 0, time.Since(start),
				fmt.Errorf("cachepool: build %q: %w", it.name, ErrBuildExited), false)
		}
	}()
	if c.runBeforeBuild(&it.base, lastBytes) {
		start = time.Now()
	}

	bctx := context.WithValue(ctx, buildKey{}, &buildFrame{c: c, b: &it.base, up: frameOf(ctx)})
	v, err = it.callBuild(bctx)
	dur := time.Since(start)
	if err != nil {
		var zero T
		finished = true
		err = fmt.Errorf("cachepool: build %q: %w", it.name, err)
		c.finishBuild(e, nil, 0, dur, err, ctx.Err() != nil)
		return zero, err
	}
	var boxed any = v
	size := c.sizeOf(&it.base, boxed)
	finished = true
	c.finishBuild(e, boxed, size, dur, nil, false)
	return v, nil
}

// callBuild runs the build function, turning a panic into a *PanicError.
func (it *Item[T]) callBuild(ctx context.Context) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			var zero T
			v, err = zero, &PanicError{Op: "build", Value: r, Stack: debug.Stack()}
		}
	}()
	return it.build(ctx)
}

// buildKey is the context key of the innermost build running in a goroutine.
type buildKey struct{}

// buildFrame records that b is being built in c; frames chain through up to
// the builds that asked for this one.
type buildFrame struct {
	c  *Cache
	b  *base
	up *buildFrame
}

func frameOf(ctx context.Context) *buildFrame {
	f, _ := ctx.Value(buildKey{}).(*buildFrame)
	return f
}

// inBuild reports whether ctx belongs to a build of b in c, or to a build
// that such a build started.
func inBuild(ctx context.Context, c *Cache, b *base) bool {
	for f := frameOf(ctx); f != nil; f = f.up {
		if f.c == c && f.b == b {
			return true
		}
	}
	return false
}

// Option configures an item made by [Define] or the members of a [Family]:
// see [Cleanup], [Size] and [MemberName]. An Option whose function takes a
// type other than the item's value type makes Define panic.
type Option interface {
	describe() string
}

type cleanupOption[T any] struct{ fn func(T) }
type sizeOption[T any] struct{ fn func(T) int64 }

func (o cleanupOption[T]) describe() string { return "Cleanup(func(" + typeName[T]() + "))" }
func (o sizeOption[T]) describe() string    { return "Size(func(" + typeName[T]() + ") int64)" }

// Cleanup makes fn the item's cleanup: it runs once for every value built,
// when that value is evicted ([Cache.Evict], [Cache.EvictGen],
// [Cache.EvictLRU], [Cache.Clear]), in the
// goroutine that evicts, never while the same item is being built in the
// same cache. Without Cleanup, a value that implements io.Closer is closed
// instead. A panic in fn is recovered and reported through the cache's error
// handler (see [Cache.SetErrorHandler]); the item is evicted all the same.
// fn must not call Get on the item it cleans up (that Get waits for fn).
// Cleanup panics when fn is nil.
func Cleanup[T any](fn func(T)) Option {
	if fn == nil {
		panic("cachepool: Cleanup: nil function")
	}
	return cleanupOption[T]{fn}
}

// Size makes fn report the number of bytes a value holds, for [Stats.Bytes]
// and [Stats.PeakBytes]. It is called once per build, right after the build
// succeeds. A panic in fn is recovered, reported through the cache's error
// handler, and counts as size 0. Size panics when fn is nil.
func Size[T any](fn func(T) int64) Option {
	if fn == nil {
		panic("cachepool: Size: nil function")
	}
	return sizeOption[T]{fn}
}

type itemOptions struct {
	cleanup func(any)
	size    func(any) int64
}

// parseOptions applies the options that fit T; other, for a family, takes
// the options that are not about T and reports whether it did.
func parseOptions[T any](what string, opts []Option, other func(Option) bool) itemOptions {
	var o itemOptions
	for _, opt := range opts {
		switch x := opt.(type) {
		case nil:
			panic(fmt.Sprintf("cachepool: %s: nil Option", what))
		case cleanupOption[T]:
			if o.cleanup != nil {
				panic(fmt.Sprintf("cachepool: %s: Cleanup given twice", what))
			}
			fn := x.fn
			o.cleanup = func(v any) {
				t, _ := v.(T)
				fn(t)
			}
		case sizeOption[T]:
			if o.size != nil {
				panic(fmt.Sprintf("cachepool: %s: Size given twice", what))
			}
			fn := x.fn
			o.size = func(v any) int64 {
				t, _ := v.(T)
				return fn(t)
			}
		default:
			if other != nil && other(opt) {
				continue
			}
			panic(fmt.Sprintf("cachepool: %s: option %s does not fit values of type %s",
				what, opt.describe(), typeName[T]()))
		}
	}
	return o
}

func typeName[T any]() string {
	return reflect.TypeFor[T]().String()
}
