package cachepool

import (
	"context"
	"fmt"
	"reflect"
	"sync"
)

// Family is a set of items of one kind whose names are known only at run
// time (cell types read from a configuration file, steps of a workflow
// file): one member item per parameter value p, named prefix + ":" + the
// parameter's text. Make one with [DefineFamily]. Members are made on demand
// by [Family.Item] and behave exactly like items made by [Define].
//
// A *Family is safe for concurrent use.
type Family[P comparable, T any] struct {
	prefix string
	site   string
	build  func(ctx context.Context, p P) (T, error)
	opts   itemOptions
	text   func(P) string

	mu      sync.RWMutex
	members map[P]*Item[T]
}

type memberNameOption[P any] struct{ fn func(P) string }

func (o memberNameOption[P]) describe() string {
	return "MemberName(func(" + typeName[P]() + ") string)"
}

// MemberName makes fn give the parameter's text in the names of a family's
// members, which are then prefix + ":" + fn(p), instead of fmt.Sprint(p).
// fn must be a pure function, so that every process names (and keys) the
// same parameter the same way, and should give different texts for
// different parameters: a member whose name is taken panics. MemberName is
// an option of [DefineFamily] only, and its P must be the family's; it
// panics when fn is nil.
func MemberName[P any](fn func(p P) string) Option {
	if fn == nil {
		panic("cachepool: MemberName: nil function")
	}
	return memberNameOption[P]{fn}
}

// DefineFamily makes and registers the family of items whose members are
// named prefix + ":" + fmt.Sprint(p) (or by the [MemberName] option) and built
// by build(ctx, p). Like [Define], call it from a package-level var
// declaration so that a parent and its re-executed workers hold the same
// families; given the same parameter, they then name and key the same
// member the same way.
//
// [Cleanup] and [Size] options take func(T) and apply to every member.
// fmt.Sprint of a pointer or a channel differs between processes, so a
// family whose P is such a type must be given MemberName.
//
// DefineFamily panics when another family has the same prefix (naming both
// definition sites), when prefix is empty, build is nil, an option does not
// fit, or P needs MemberName and has none.
func DefineFamily[P comparable, T any](prefix string, build func(ctx context.Context, p P) (T, error), opts ...Option) *Family[P, T] {
	if prefix == "" {
		panic("cachepool: DefineFamily: empty prefix")
	}
	if build == nil {
		panic(fmt.Sprintf("cachepool: DefineFamily %q: nil build function", prefix))
	}
	what := fmt.Sprintf("DefineFamily %q", prefix)
	f := &Family[P, T]{
		prefix:  prefix,
		site:    callerSite(1),
		build:   build,
		members: make(map[P]*Item[T]),
	}
	f.opts = parseOptions[T](what, opts, func(opt Option) bool {
		o, ok := opt.(memberNameOption[P])
		if !ok {
			return false
		}
		if f.text != nil {
			panic(fmt.Sprintf("cachepool: %s: MemberName given twice", what))
		}
		f.text = o.fn
		return true
	})
	if f.text == nil {
		switch reflect.TypeFor[P]().Kind() {
		case reflect.Pointer, reflect.Chan, reflect.UnsafePointer:
			panic(fmt.Sprintf("cachepool: %s: parameters of type %s print differently in each process; give MemberName",
				what, typeName[P]()))
		}
		f.text = func(p P) string { return fmt.Sprint(p) }
	}
	reg.addFamily(prefix, f.site)
	return f
}

// Prefix returns the family's prefix, as given to [DefineFamily].
func (f *Family[P, T]) Prefix() string { return f.prefix }

// Item returns the member of the family for parameter p, making and
// registering it on the first call for p in this process; later calls with
// an equal p return the same *Item. Once made, the member is found by
// [Lookup]. Item panics, naming both, when the member's name or key is
// already taken by another item; the member is not made then, and the next
// call for p panics again.
func (f *Family[P, T]) Item(p P) *Item[T] {
	f.mu.RLock()
	it := f.members[p]
	f.mu.RUnlock()
	if it != nil {
		return it
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if it := f.members[p]; it != nil {
		return it
	}
	name := f.prefix + ":" + f.text(p)
	it = newItem(name, f.site, f.opts, func(ctx context.Context) (T, error) {
		return f.build(ctx, p)
	})
	it.family = f.prefix
	reg.add(&it.base)
	f.members[p] = it
	return it
}
