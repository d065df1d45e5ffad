package cachepool

import (
	"fmt"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/cespare/xxhash/v2"
)

// ZeroHashKey is the key of a name whose xxhash64 is 0. Key 0 marks an empty
// slot of the shared window, so [Key] never returns it and returns this fixed
// value instead (the 64-bit golden ratio, 0x9e3779b97f4a7c15). A name whose
// xxhash64 is ZeroHashKey itself would collide with such a name; the registry
// detects that like any other collision.
const ZeroHashKey uint64 = 0x9e3779b97f4a7c15

// Key returns the key of the item called name: the xxhash64
// (github.com/cespare/xxhash/v2, seed 0) of the name's bytes, or
// [ZeroHashKey] when that hash is 0. Key never returns 0. It is a pure
// function, so a parent and its re-executed workers agree on every key.
func Key(name string) uint64 {
	return keyFromHash(xxhash.Sum64String(name))
}

func keyFromHash(h uint64) uint64 {
	if h == 0 {
		return ZeroHashKey
	}
	return h
}

// Handle is what identifies an item to the rest of poolrun (engine.Uses and
// engine.Needs take Handles): its name and its key, Key(name). Every
// *[Item] is a Handle.
type Handle interface {
	Name() string
	Key() uint64
}

// Lookup returns the item registered under key, for reports that turn keys
// back into names. Items made by [Define] are registered at package
// initialisation; a member of a [Family] is registered only once
// [Family.Item] has created it in this process. The second result is false
// when no item has the key.
func Lookup(key uint64) (Handle, bool) {
	b := reg.byKeyLookup(key)
	if b == nil {
		return nil, false
	}
	return b.handle, true
}

// base is the untyped part of an item: what the registry and the cache need.
type base struct {
	name   string
	key    uint64
	id     int    // index into a Cache's slot table; 1 and up once registered
	site   string // where it was defined, "dir/file.go:line"
	typ    string // the value type, for messages
	handle Handle // the *Item[T] that embeds this base
	family string // the prefix of its Family; "" for Define's items

	cleanup func(v any)       // nil: close io.Closer values
	size    func(v any) int64 // nil: size 0
}

// describe names the item for panic messages.
func (b *base) describe() string {
	return fmt.Sprintf("%q (%s, defined at %s)", b.name, b.typ, b.site)
}

// registry is the process-wide set of item definitions and family prefixes.
// The package holds exactly one, reg; tests make their own to exercise
// collisions that real names cannot produce cheaply.
type registry struct {
	mu       sync.RWMutex
	byName   map[string]*base
	byKey    map[uint64]*base
	families map[string]string // prefix -> definition site
	lastID   int
}

var reg = newRegistry()

func newRegistry() *registry {
	return &registry{
		byName:   make(map[string]*base),
		byKey:    make(map[uint64]*base),
		families: make(map[string]string),
	}
}

// add registers b, giving it its id. It panics, naming both definitions, when
// another item has the same name or the same key; b is not registered then.
func (r *registry) add(b *base) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.byName[b.name]; ok {
		panic(fmt.Sprintf("cachepool: item %q defined twice: first %s, again %s",
			b.name, old.describe(), b.describe()))
	}
	if old, ok := r.byKey[b.key]; ok {
		panic(fmt.Sprintf("cachepool: items %s and %s have the same key %#016x; rename one",
			old.describe(), b.describe(), b.key))
	}
	r.lastID++
	b.id = r.lastID
	r.byName[b.name] = b
	r.byKey[b.key] = b
}

// addFamily reserves prefix for one family; a second family with the same
// prefix panics, naming both definition sites.
func (r *registry) addFamily(prefix, site string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.families[prefix]; ok {
		panic(fmt.Sprintf("cachepool: item family %q defined twice: first at %s, again at %s",
			prefix, old, site))
	}
	r.families[prefix] = site
}

func (r *registry) byKeyLookup(key uint64) *base {
	r.mu.RLock()
	b := r.byKey[key]
	r.mu.RUnlock()
	return b
}

// callerSite returns "dir/file.go:line" of the caller skip frames above its
// own caller, for messages about duplicate definitions.
func callerSite(skip int) string {
	_, file, line, ok := runtime.Caller(skip + 1)
	if !ok {
		return "unknown place"
	}
	dir, name := filepath.Split(file)
	return fmt.Sprintf("%s:%d", filepath.Join(filepath.Base(dir), name), line)
}
