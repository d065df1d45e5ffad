package engine

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/cespare/xxhash/v2"

	"github.com/poolrun/poolrun/cachepool"
)

// funcEntry is a registered job function, untyped.
type funcEntry struct {
	name  string
	items []cachepool.Handle
	keys  []uint64 // of items, sorted, deduplicated
	sig   string   // sigOf(keys): the ready-queue group of its jobs
	// call decodes an argument, runs the function and encodes its result,
	// of at most limit bytes.
	call func(ctx context.Context, arg []byte, limit int) ([]byte, error)
}

// registry holds every registered function by name. It is written at package
// initialisation and only read afterwards.
var registry = struct {
	sync.RWMutex
	funcs map[string]*funcEntry
}{funcs: map[string]*funcEntry{}}

func lookupFunc(name string) *funcEntry {
	registry.RLock()
	defer registry.RUnlock()
	return registry.funcs[name]
}

// A Func is a job function registered under a name, so that a worker process
// (the same binary, re-executed) finds it by that name. A is the argument's
// type and R the result's; both travel between processes with encoding/gob,
// so their exported fields are what arrives. A type that implements
// encoding.BinaryMarshaler, and whose pointer implements
// encoding.BinaryUnmarshaler, travels as the bytes of those methods
// instead: gob describes the type with every value and compiles a decoder
// for it each time, which a function whose jobs take a millisecond or
// less may want to spare (BenchmarkCodec in package bench measures both).
type Func[A, R any] struct {
	e  *funcEntry
	fn func(ctx context.Context, arg A) (R, error)
}

// Name returns the name the function was registered under.
func (f *Func[A, R]) Name() string { return f.e.name }

// A FuncOption configures a registered function.
type FuncOption func(*funcEntry)

// Uses declares cache items that every job of the function needs, on top of
// those a job adds with [Needs].
func Uses(items ...cachepool.Handle) FuncOption {
	return func(e *funcEntry) { e.items = append(e.items, items...) }
}

// Register registers fn under name and returns it for use with [Queue].
// Call it at package initialisation (a package-level var), so that every
// process running the binary registers the same functions: a worker finds a
// job's function by its name. Registering a name twice panics.
func Register[A, R any](name string, fn func(ctx context.Context, arg A) (R, error), opts ...FuncOption) *Func[A, R] {
	if name == "" {
		panic("engine: Register with an empty name")
	}
	if fn == nil {
		panic("engine: Register(" + name + ") with a nil function")
	}
	f := &Func[A, R]{fn: fn}
	e := &funcEntry{name: name}
	for _, o := range opts {
		o(e)
	}
	e.keys = handleKeys(e.items)
	e.sig = sigOf(e.keys)
	argCodec, resCodec := codecOf[A](), codecOf[R]()
	e.call = func(ctx context.Context, argData []byte, limit int) ([]byte, error) {
		var arg A
		if err := decodeAs(argCodec, argData, &arg); err != nil {
			return nil, fmt.Errorf("decoding the argument (%T): %w", arg, err)
		}
		res, err := f.fn(ctx, arg)
		if err != nil {
			return nil, err
		}
		out, err := encodeAs(resCodec, res, limit)
		if err != nil {
			return nil, fmt.Errorf("encoding the result (%T): %w", res, err)
		}
		return out, nil
	}
	f.e = e
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.funcs[name]; dup {
		panic("engine: function " + name + " registered twice")
	}
	registry.funcs[name] = e
	return f
}

func handleKeys(items []cachepool.Handle) []uint64 {
	keys := make([]uint64, 0, len(items))
	for _, it := range items {
		keys = append(keys, it.Key())
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// fingerprint identifies this build as a pool's workers must match it: a
// hash of the protocol version and the names of the registered functions,
// in hexadecimal. A worker of another build would not find a job's
// function, or would read its frames otherwise.
func fingerprint() string {
	registry.RLock()
	names := make([]string, 0, len(registry.funcs))
	for name := range registry.funcs {
		names = append(names, name)
	}
	registry.RUnlock()
	slices.Sort(names)
	h := xxhash.New()
	fmt.Fprintf(h, "poolrun protocol %d\n", protoVersion)
	for _, n := range names {
		h.WriteString(n)
		h.WriteString("\n")
	}
	return strconv.FormatUint(h.Sum64(), 16)
}
