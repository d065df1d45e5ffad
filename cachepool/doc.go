// Package cachepool is poolrun's per-process cache of named, expensive
// items: a loaded file, an index, a parsed model. An item is built in the
// worker process that first needs it, kept while some job in the pool still
// needs it, and cleaned up exactly once when none does. It is the Go
// counterpart of the Brain Scaffold Builder's pool_cache.
//
// # Items and keys
//
// An item is defined once, at package level, with a name and a build
// function:
//
//	var atlas = cachepool.Define("atlas", func(ctx context.Context) (*Atlas, error) {
//		return loadAtlas(ctx, "atlas.nrrd")
//	}, cachepool.Size((*Atlas).Bytes))
//
// Its key, [Key](name), is the xxhash64 of the name and is never 0 (see
// [ZeroHashKey]); keys are what the parent publishes in the shared window
// (package github.com/poolrun/poolrun/shm) and what [Lookup] turns back into
// names. Because definitions live in package-level variables, a parent and
// every worker it re-executes from the same binary hold the same items under
// the same keys; serial mode uses the very same keys and eviction path.
//
// Items whose names are known only at run time, such as one per cell type of
// a configuration file, form a [Family]: [DefineFamily] registers the
// family at package level, and [Family.Item] returns the member for a
// parameter, named prefix + ":" + parameter, in any process.
//
// Registration panics when two definitions share a name, a key, or a family
// prefix: that is a programming error, reported at start-up with both
// definition sites, not a silent merge.
//
// # Getting values
//
// [Item.Get] returns the value from the [Cache] carried by the context
// ([WithCache]) or from the process's [Default] cache. The first Get builds
// it; concurrent callers wait for that one build; later calls are hits that
// neither lock nor allocate. Values are found through the item itself, never
// through its key, so even a hash collision could not hand back another
// item's value. A failed or panicking build is not memoised; its error is
// returned wrapped with the item's name.
//
// # Eviction
//
// Before each job, a worker takes a snapshot of the window and calls
// [Cache.Evict] (or [Cache.EvictGen]) with the snapshot's Contains method:
// every resident item whose key is no longer required is cleaned up. A
// cleanup ([Cleanup], or Close for an io.Closer value) runs exactly once per
// build, never while the same item is being built in the same cache, and a
// Get that starts after the eviction builds a fresh value. A panicking
// cleanup is reported to the cache's error handler ([Cache.SetErrorHandler],
// by default the standard logger) and does not bring the worker down.
// [Cache.Clear] frees everything at the end of a pool.
//
// # Memory budget
//
// A worker held to a memory budget uses four more methods.
// [Cache.Resident] lists the resident items with their sizes (as [Size]
// reported them) and the order of their latest use; [Cache.Version]
// changes exactly when that set does, and costs one atomic load, so that a
// worker reports the set again only when it changed. [Cache.SetBeforeBuild]
// runs a function before every build, with the item's size at its last
// build in the cache; [Cache.EvictLRU], called from there, evicts the least
// recently used items that the job at hand does not need until the
// resident bytes leave room for the build. Its evictions are evictions like
// any other: each cleanup runs once and [Stats.Evictions] counts them.
//
// # Journal
//
// [Cache.SetJournal] makes a cache record every successful build (its
// start, end and size) and every eviction, and [Cache.TakeJournal] hands
// the [Record]s out: a poolrun worker sends them to the pool with its
// replies, so that a report can name each item and draw its lifetime.
//
// # Lifetimes and caveats
//
//   - A value returned by Get stays valid until its item is next evicted;
//     code that keeps it beyond the job that asked for it must not expect
//     it to survive the next eviction.
//   - A cleanup must not Get the item it cleans up, the keep function
//     given to Evict or EvictLRU must not call the cache, and a
//     before-build function must not call Get: all would wait for
//     themselves.
//   - A build that asks for its own item, directly or through other items,
//     gets [ErrCycle].
//   - [Stats] are counted per cache and therefore per process; the engine
//     sums them over workers.
package cachepool
