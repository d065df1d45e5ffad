package cachepool_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/poolrun/poolrun/cachepool"
)

// seq makes item names unique within the test binary, so that tests that
// define items can run with -count > 1 without tripping the duplicate check.
var seq atomic.Int64

func uniqueName(t testing.TB, what string) string {
	return fmt.Sprintf("test/%s/%s#%d", t.Name(), what, seq.Add(1))
}

// newCtx returns a context carrying a fresh cache, and the cache.
func newCtx(t testing.TB) (context.Context, *cachepool.Cache) {
	c := cachepool.New()
	c.SetErrorHandler(func(name string, err error) {
		t.Errorf("unexpected error reported for %q: %v", name, err)
	})
	return cachepool.WithCache(t.Context(), c), c
}

// counter is a build function that counts its calls and returns the call
// number, failing or panicking on the calls the test asks for.
type counter struct {
	calls   atomic.Int64
	failOn  map[int64]bool
	panicOn map[int64]bool
}

var errBuild = errors.New("build failed on purpose")

func (b *counter) build(ctx context.Context) (int64, error) {
	n := b.calls.Add(1)
	if b.panicOn[n] {
		panic(fmt.Sprintf("boom on call %d", n))
	}
	if b.failOn[n] {
		return 0, errBuild
	}
	return n, nil
}

func sorted(keys []uint64) []uint64 {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	return keys
}

// residentKeys returns the keys that c.Resident reports, in its order (by
// key), or nil when nothing is resident.
func residentKeys(c *cachepool.Cache) []uint64 {
	var keys []uint64
	for _, r := range c.Resident(nil) {
		keys = append(keys, r.Key)
	}
	return keys
}

func TestKey(t *testing.T) {
	for _, name := range []string{"", "a", "atlas", "cells:granule", strings.Repeat("x", 100)} {
		got := cachepool.Key(name)
		if want := xxhash.Sum64String(name); got != want {
			t.Errorf("Key(%q) = %#x, want xxhash64 %#x", name, got, want)
		}
		if got == 0 {
			t.Errorf("Key(%q) = 0", name)
		}
	}
	it := cachepool.Define(uniqueName(t, "k"), (&counter{}).build)
	if it.Key() != cachepool.Key(it.Name()) {
		t.Errorf("Item.Key() = %#x, want Key(Name()) = %#x", it.Key(), cachepool.Key(it.Name()))
	}
}

// TestGet drives one item through a sequence of Gets and checks each
// outcome and the counters at the end.
func TestGet(t *testing.T) {
	type step struct {
		want    int64 // value expected when no error
		wantErr error // errors.Is target; nil means success
	}
	tests := []struct {
		name                 string
		failOn, panicOn      []int64
		steps                []step
		hits, misses         uint64
		resident             int
		wantBuilds           int64
		wantPanicValueSubstr string
	}{
		{
			name:  "miss then hits",
			steps: []step{{want: 1}, {want: 1}, {want: 1}},
			hits:  2, misses: 1, resident: 1, wantBuilds: 1,
		},
		{
			name:   "failed build is not memoised",
			failOn: []int64{1, 2},
			steps:  []step{{wantErr: errBuild}, {wantErr: errBuild}, {want: 3}, {want: 3}},
			hits:   1, misses: 3, resident: 1, wantBuilds: 3,
		},
		{
			name:    "panicking build becomes an error and is not memoised",
			panicOn: []int64{1},
			steps:   []step{{wantErr: cachepool.ErrPanic}, {want: 2}, {want: 2}},
			hits:    1, misses: 2, resident: 1, wantBuilds: 2,
			wantPanicValueSubstr: "boom on call 1",
		},
		{
			name:   "build that always fails leaves nothing resident",
			failOn: []int64{1, 2},
			steps:  []step{{wantErr: errBuild}, {wantErr: errBuild}},
			hits:   0, misses: 2, resident: 0, wantBuilds: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &counter{failOn: map[int64]bool{}, panicOn: map[int64]bool{}}
			for _, n := range tt.failOn {
				b.failOn[n] = true
			}
			for _, n := range tt.panicOn {
				b.panicOn[n] = true
			}
			it := cachepool.Define(uniqueName(t, "item"), b.build)
			ctx, c := newCtx(t)
			for i, s := range tt.steps {
				got, err := it.Get(ctx)
				if s.wantErr != nil {
					if !errors.Is(err, s.wantErr) {
						t.Fatalf("step %d: err = %v, want %v", i, err, s.wantErr)
					}
					if !strings.Contains(err.Error(), it.Name()) {
						t.Errorf("step %d: error %q does not name the item %q", i, err, it.Name())
					}
					if errors.Is(err, cachepool.ErrPanic) {
						var pe *cachepool.PanicError
						if !errors.As(err, &pe) {
							t.Fatalf("step %d: %v is not a *PanicError", i, err)
						}
						if pe.Op != "build" || !strings.Contains(fmt.Sprint(pe.Value), tt.wantPanicValueSubstr) {
							t.Errorf("step %d: PanicError{Op: %q, Value: %v}", i, pe.Op, pe.Value)
						}
						if !bytes.Contains(pe.Stack, []byte("counter).build")) {
							t.Errorf("step %d: stack does not show the build:\n%s", i, pe.Stack)
						}
					}
					if got != 0 {
						t.Errorf("step %d: value %d returned with an error", i, got)
					}
					continue
				}
				if err != nil || got != s.want {
					t.Fatalf("step %d: Get = %d, %v; want %d, nil", i, got, err, s.want)
				}
			}
			st := c.Stats()
			if st.Hits != tt.hits || st.Builds != tt.misses || st.Resident != tt.resident {
				t.Errorf("Stats = %+v, want Hits %d Builds %d Resident %d", st, tt.hits, tt.misses, tt.resident)
			}
			if n := b.calls.Load(); n != tt.wantBuilds {
				t.Errorf("build ran %d times, want %d", n, tt.wantBuilds)
			}
			if c.Has(it.Key()) != (tt.resident == 1) {
				t.Errorf("Has = %v, want %v", c.Has(it.Key()), tt.resident == 1)
			}
			if st.BuildTime <= 0 && st.Builds > 0 {
				t.Errorf("BuildTime = %v after %d builds", st.BuildTime, st.Builds)
			}
		})
	}
}

func TestWithCacheAndDefault(t *testing.T) {
	if cachepool.FromContext(context.Background()) != cachepool.Default() {
		t.Fatal("FromContext(Background) is not Default()")
	}
	if cachepool.FromContext(cachepool.WithCache(context.Background(), nil)) != cachepool.Default() {
		t.Fatal("WithCache(ctx, nil) does not stand for Default()")
	}
	c := cachepool.New()
	ctx := cachepool.WithCache(context.Background(), c)
	type k struct{}
	derived := context.WithValue(ctx, k{}, 1)
	if cachepool.FromContext(derived) != c {
		t.Fatal("a context derived from WithCache(ctx, c) does not carry c")
	}

	it := cachepool.Define(uniqueName(t, "x"), (&counter{}).build)
	if _, err := it.Get(derived); err != nil {
		t.Fatal(err)
	}
	if !c.Has(it.Key()) {
		t.Error("item not resident in the context's cache")
	}
	if cachepool.Default().Has(it.Key()) {
		t.Error("item resident in Default(), which the context did not name")
	}

	// Without a cache in the context, Get uses Default().
	it2 := cachepool.Define(uniqueName(t, "y"), (&counter{}).build)
	if _, err := it2.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cachepool.Default().Evict(func(k uint64) bool { return k != it2.Key() }) })
	if !cachepool.Default().Has(it2.Key()) || c.Has(it2.Key()) {
		t.Errorf("Default().Has = %v, c.Has = %v; want true, false",
			cachepool.Default().Has(it2.Key()), c.Has(it2.Key()))
	}
}

// sized is a value with a size and a record of its cleanups.
type sized struct {
	name    string
	bytes   int64
	cleaned atomic.Int32
}

func TestSizeAndPeakBytes(t *testing.T) {
	ctx, c := newCtx(t)
	items := map[string]*cachepool.Item[*sized]{}
	for name, n := range map[string]int64{"a": 100, "b": 50, "c": 10} {
		items[name] = cachepool.Define(uniqueName(t, name),
			func(context.Context) (*sized, error) { return &sized{name: name, bytes: n}, nil },
			cachepool.Size(func(s *sized) int64 { return s.bytes }),
			cachepool.Cleanup(func(s *sized) { s.cleaned.Add(1) }))
	}
	get := func(name string) {
		if _, err := items[name].Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	evict := func(name string) {
		key := items[name].Key()
		if got := c.Evict(func(k uint64) bool { return k != key }); !slices.Equal(got, []uint64{key}) {
			t.Fatalf("Evict(%s) = %x, want [%x]", name, got, key)
		}
	}
	steps := []struct {
		name             string
		do               func()
		bytes, peak      int64
		resident         int
		misses, evictons uint64
	}{
		{"build a", func() { get("a") }, 100, 100, 1, 1, 0},
		{"build b", func() { get("b") }, 150, 150, 2, 2, 0},
		{"hit a", func() { get("a") }, 150, 150, 2, 2, 0},
		{"evict a", func() { evict("a") }, 50, 150, 1, 2, 1},
		{"build c", func() { get("c") }, 60, 150, 2, 3, 1},
		{"rebuild a", func() { get("a") }, 160, 160, 3, 4, 1},
		{"clear", func() { c.Clear() }, 0, 160, 0, 4, 4},
	}
	for _, s := range steps {
		s.do()
		st := c.Stats()
		if st.Bytes != s.bytes || st.PeakBytes != s.peak || st.Resident != s.resident ||
			st.Builds != s.misses || st.Evictions != s.evictons {
			t.Errorf("after %s: Stats = %+v, want Bytes %d PeakBytes %d Resident %d Builds %d Evictions %d",
				s.name, st, s.bytes, s.peak, s.resident, s.misses, s.evictons)
		}
	}
}

func TestClear(t *testing.T) {
	ctx, c := newCtx(t)
	if got := c.Clear(); got != nil {
		t.Fatalf("Clear on an empty cache = %x, want nil", got)
	}
	var cleaned []string
	var want []uint64
	for _, name := range []string{"first", "second", "third"} {
		it := cachepool.Define(uniqueName(t, name),
			func(context.Context) (string, error) { return name, nil },
			cachepool.Cleanup(func(v string) { cleaned = append(cleaned, v) }))
		if _, err := it.Get(ctx); err != nil {
			t.Fatal(err)
		}
		want = append(want, it.Key())
	}
	if got := residentKeys(c); !slices.Equal(got, sorted(want)) {
		t.Fatalf("Resident = %x, want %x", got, sorted(want))
	}
	got := c.Clear()
	slices.Reverse(want)
	if !slices.Equal(got, want) {
		t.Errorf("Clear = %x, want %x (most recently built first)", got, want)
	}
	if !slices.Equal(cleaned, []string{"third", "second", "first"}) {
		t.Errorf("cleanups ran for %q, want third, second, first", cleaned)
	}
	if r := c.Resident(nil); r != nil {
		t.Errorf("Resident after Clear = %+v", r)
	}
	if got := c.Clear(); got != nil {
		t.Errorf("second Clear = %x, want nil", got)
	}
	if len(cleaned) != 3 {
		t.Errorf("%d cleanups after two Clears, want 3", len(cleaned))
	}
}

// closer is an io.Closer that counts its Close calls.
type closer struct {
	closed atomic.Int32
	err    error
}

func (c *closer) Close() error {
	c.closed.Add(1)
	return c.err
}

func TestCloserClosedOnce(t *testing.T) {
	tests := []struct {
		name        string
		withCleanup bool
		evict       func(c *cachepool.Cache, key uint64) []uint64
		wantClosed  int32
	}{
		{
			name:       "Evict closes",
			evict:      func(c *cachepool.Cache, key uint64) []uint64 { return c.Evict(func(uint64) bool { return false }) },
			wantClosed: 1,
		},
		{
			name:       "Clear closes",
			evict:      func(c *cachepool.Cache, key uint64) []uint64 { return c.Clear() },
			wantClosed: 1,
		},
		{
			name: "EvictGen closes",
			evict: func(c *cachepool.Cache, key uint64) []uint64 {
				return c.EvictGen(7, func(uint64) bool { return false })
			},
			wantClosed: 1,
		},
		{
			name:        "a Cleanup replaces Close",
			withCleanup: true,
			evict:       func(c *cachepool.Cache, key uint64) []uint64 { return c.Clear() },
			wantClosed:  0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var built []*closer
			var cleanups atomic.Int32
			var opts []cachepool.Option
			if tt.withCleanup {
				opts = append(opts, cachepool.Cleanup(func(*closer) { cleanups.Add(1) }))
			}
			it := cachepool.Define(uniqueName(t, "closer"), func(context.Context) (*closer, error) {
				c := &closer{}
				built = append(built, c)
				return c, nil
			}, opts...)
			ctx, c := newCtx(t)
			if _, err := it.Get(ctx); err != nil {
				t.Fatal(err)
			}
			if got := tt.evict(c, it.Key()); !slices.Equal(got, []uint64{it.Key()}) {
				t.Fatalf("evicted %x, want [%x]", got, it.Key())
			}
			// Evicting again, by every path, must not close again.
			c.Evict(func(uint64) bool { return false })
			c.Clear()
			c.EvictGen(8, func(uint64) bool { return false })
			if len(built) != 1 {
				t.Fatalf("%d builds, want 1", len(built))
			}
			if got := built[0].closed.Load(); got != tt.wantClosed {
				t.Errorf("closed %d times, want %d", got, tt.wantClosed)
			}
			if tt.withCleanup && cleanups.Load() != 1 {
				t.Errorf("cleanup ran %d times, want 1", cleanups.Load())
			}
			// The next Get builds a new value, closed by the next eviction.
			if _, err := it.Get(ctx); err != nil {
				t.Fatal(err)
			}
			c.Clear()
			if len(built) != 2 || built[1].closed.Load() != tt.wantClosed || built[0].closed.Load() != tt.wantClosed {
				t.Errorf("after a rebuild and Clear: %d builds, closes %d and %d, want 2 builds closed %d times each",
					len(built), built[0].closed.Load(), built[len(built)-1].closed.Load(), tt.wantClosed)
			}
		})
	}
}

func TestCleanupFailuresAreReported(t *testing.T) {
	errClose := errors.New("close failed on purpose")
	tests := []struct {
		name    string
		define  func(name string) cachepool.Handle
		wantIs  error
		wantMsg string
	}{
		{
			name: "panicking cleanup",
			define: func(name string) cachepool.Handle {
				return cachepool.Define(name, func(context.Context) (int, error) { return 1, nil },
					cachepool.Cleanup(func(int) { panic("cleanup boom") }))
			},
			wantIs:  cachepool.ErrPanic,
			wantMsg: "cleanup boom",
		},
		{
			name: "failing Close",
			define: func(name string) cachepool.Handle {
				return cachepool.Define(name, func(context.Context) (*closer, error) { return &closer{err: errClose}, nil })
			},
			wantIs:  errClose,
			wantMsg: "close failed on purpose",
		},
		{
			name: "panicking Size",
			define: func(name string) cachepool.Handle {
				return cachepool.Define(name, func(context.Context) (int, error) { return 1, nil },
					cachepool.Size(func(int) int64 { panic("size boom") }))
			},
			wantIs:  cachepool.ErrPanic,
			wantMsg: "size boom",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.define(uniqueName(t, "bad"))
			c := cachepool.New()
			type report struct {
				name string
				err  error
			}
			var reports []report
			c.SetErrorHandler(func(name string, err error) { reports = append(reports, report{name, err}) })
			ctx := cachepool.WithCache(t.Context(), c)
			if err := getAny(ctx, h); err != nil {
				t.Fatal(err)
			}
			if got := c.Clear(); !slices.Equal(got, []uint64{h.Key()}) {
				t.Errorf("Clear = %x, want [%x]: a failing cleanup still evicts", got, h.Key())
			}
			if c.Has(h.Key()) || c.Stats().Resident != 0 {
				t.Error("item still resident after a failing cleanup")
			}
			if len(reports) != 1 {
				t.Fatalf("%d reports, want 1: %v", len(reports), reports)
			}
			r := reports[0]
			if r.name != h.Name() || !errors.Is(r.err, tt.wantIs) ||
				!strings.Contains(r.err.Error(), tt.wantMsg) || !strings.Contains(r.err.Error(), h.Name()) {
				t.Errorf("report (%q, %v), want (%q, an error naming it that matches %v and says %q)",
					r.name, r.err, h.Name(), tt.wantIs, tt.wantMsg)
			}
			// The cache keeps working: the item builds again.
			if err := getAny(ctx, h); err != nil || !c.Has(h.Key()) {
				t.Errorf("Get after the failure: %v, resident %v", err, c.Has(h.Key()))
			}
		})
	}
}

// getAny calls Get on an item of one of the value types the tests use.
func getAny(ctx context.Context, h cachepool.Handle) error {
	var err error
	switch it := h.(type) {
	case *cachepool.Item[int]:
		_, err = it.Get(ctx)
	case *cachepool.Item[*closer]:
		_, err = it.Get(ctx)
	default:
		panic(fmt.Sprintf("getAny: %T", h))
	}
	return err
}

func TestDefaultErrorHandlerLogs(t *testing.T) {
	var buf bytes.Buffer
	out, flags := log.Writer(), log.Flags()
	log.SetOutput(&buf)
	log.SetFlags(0)
	t.Cleanup(func() { log.SetOutput(out); log.SetFlags(flags) })

	name := uniqueName(t, "logged")
	it := cachepool.Define(name, func(context.Context) (int, error) { return 1, nil },
		cachepool.Cleanup(func(int) { panic("logged boom") }))
	c := cachepool.New()
	c.SetErrorHandler(func(string, error) { t.Error("a handler that was replaced by nil was called") })
	c.SetErrorHandler(nil)
	if _, err := it.Get(cachepool.WithCache(t.Context(), c)); err != nil {
		t.Fatal(err)
	}
	c.Clear()
	got := buf.String()
	if !strings.Contains(got, name) || !strings.Contains(got, "logged boom") || !strings.Contains(got, "goroutine ") {
		t.Errorf("log output %q does not name the item and the panic and show the stack", got)
	}
}

func TestLookup(t *testing.T) {
	it := cachepool.Define(uniqueName(t, "found"), (&counter{}).build)
	h, ok := cachepool.Lookup(it.Key())
	if !ok || h != cachepool.Handle(it) {
		t.Errorf("Lookup(%x) = %v, %v; want the item", it.Key(), h, ok)
	}
	if h, ok := cachepool.Lookup(cachepool.Key(uniqueName(t, "never defined"))); ok || h != nil {
		t.Errorf("Lookup of an undefined key = %v, %v; want nil, false", h, ok)
	}
	if _, ok := cachepool.Lookup(0); ok {
		t.Error("Lookup(0) found something")
	}
}

// recoverPanic returns the message of the panic f raises, or "" if none.
func recoverPanic(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// A misuse is a call that must panic with a message that holds each of
// want.
type misuse struct {
	name string
	f    func()
	want []string // substrings of the panic message
}

// checkPanics makes each call of tests, as a subtest, and checks its
// panic.
func checkPanics(t *testing.T, tests []misuse) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := recoverPanic(tt.f)
			if msg == "" {
				t.Fatal("no panic")
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("panic %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestDefineMisuse(t *testing.T) {
	name := uniqueName(t, "dup")
	cachepool.Define(name, (&counter{}).build) // first definition: line A
	tests := []misuse{
		{
			name: "same name",
			f:    func() { cachepool.Define(name, func(context.Context) (string, error) { return "", nil }) },
			want: []string{"cachepool:", name, "defined twice", "int64", "string", "cachepool_test.go:"},
		},
		{
			name: "empty name",
			f:    func() { cachepool.Define("", (&counter{}).build) },
			want: []string{"cachepool:", "empty"},
		},
		{
			name: "nil build",
			f:    func() { cachepool.Define[int](uniqueName(t, "nil"), nil) },
			want: []string{"cachepool:", "nil build"},
		},
		{
			name: "option of another type",
			f: func() {
				cachepool.Define(uniqueName(t, "opt"), (&counter{}).build, cachepool.Cleanup(func(string) {}))
			},
			want: []string{"cachepool:", "Cleanup(func(string))", "int64"},
		},
		{
			name: "Cleanup twice",
			f: func() {
				cachepool.Define(uniqueName(t, "opt2"), (&counter{}).build,
					cachepool.Cleanup(func(int64) {}), cachepool.Cleanup(func(int64) {}))
			},
			want: []string{"cachepool:", "Cleanup given twice"},
		},
		{
			name: "MemberName on a single item",
			f: func() {
				cachepool.Define(uniqueName(t, "opt3"), (&counter{}).build, cachepool.MemberName(func(int) string { return "" }))
			},
			want: []string{"cachepool:", "MemberName"},
		},
		{
			name: "nil option",
			f:    func() { cachepool.Define(uniqueName(t, "opt4"), (&counter{}).build, nil) },
			want: []string{"cachepool:", "nil Option"},
		},
		{
			name: "nil Cleanup function",
			f:    func() { cachepool.Cleanup[int](nil) },
			want: []string{"cachepool:", "Cleanup"},
		},
		{
			name: "Get on a zero Item",
			f:    func() { new(cachepool.Item[int]).Get(context.Background()) },
			want: []string{"cachepool:", "not made by Define"},
		},
	}
	checkPanics(t, tests)
	// The failed definitions left the registry as it was.
	if h, ok := cachepool.Lookup(cachepool.Key(name)); !ok || h.Name() != name {
		t.Errorf("Lookup after the duplicate = %v, %v; want the first definition", h, ok)
	}
}

func TestEvict(t *testing.T) {
	ctx, c := newCtx(t)
	var items []*cachepool.Item[string]
	cleaned := map[string]int{}
	for i := range 5 {
		name := uniqueName(t, fmt.Sprint(i))
		items = append(items, cachepool.Define(name,
			func(context.Context) (string, error) { return name, nil },
			cachepool.Cleanup(func(v string) { cleaned[v]++ })))
	}
	if got := c.Evict(func(uint64) bool { return false }); got != nil {
		t.Errorf("Evict on an empty cache = %x, want nil", got)
	}
	for _, it := range items {
		if _, err := it.Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	keys := func(idx ...int) []uint64 {
		var k []uint64
		for _, i := range idx {
			k = append(k, items[i].Key())
		}
		return sorted(k)
	}
	required := keys(0, 2, 3)
	var asked []uint64
	got := c.Evict(func(k uint64) bool {
		asked = append(asked, k)
		_, found := slices.BinarySearch(required, k)
		return found
	})
	if want := keys(1, 4); !slices.Equal(sorted(got), want) {
		t.Errorf("Evict = %x, want %x", got, want)
	}
	if want := keys(0, 1, 2, 3, 4); !slices.Equal(sorted(asked), want) {
		t.Errorf("keep was asked about %x, want each resident key once: %x", asked, want)
	}
	for i, it := range items {
		wantResident := i == 0 || i == 2 || i == 3
		if c.Has(it.Key()) != wantResident {
			t.Errorf("item %d: Has = %v, want %v", i, !wantResident, wantResident)
		}
		wantCleaned := 0
		if !wantResident {
			wantCleaned = 1
		}
		if cleaned[it.Name()] != wantCleaned {
			t.Errorf("item %d cleaned %d times, want %d", i, cleaned[it.Name()], wantCleaned)
		}
	}
	if got := residentKeys(c); !slices.Equal(got, required) {
		t.Errorf("Resident = %x, want %x", got, required)
	}
	// Nothing else to evict: nil, and the build order of the rest is kept
	// (Clear cleans up the most recently built first).
	if got := c.Evict(func(k uint64) bool { _, f := slices.BinarySearch(required, k); return f }); got != nil {
		t.Errorf("second Evict = %x, want nil", got)
	}
	if got, want := c.Clear(), []uint64{items[3].Key(), items[2].Key(), items[0].Key()}; !slices.Equal(got, want) {
		t.Errorf("Clear = %x, want %x: the reverse build order", got, want)
	}
	if c.Has(cachepool.Key(uniqueName(t, "unknown"))) {
		t.Error("Has is true for an undefined key")
	}
}

func TestEvictPanickingKeepChangesNothing(t *testing.T) {
	ctx, c := newCtx(t)
	it := cachepool.Define(uniqueName(t, "a"), (&counter{}).build)
	it2 := cachepool.Define(uniqueName(t, "b"), (&counter{}).build)
	for _, it := range []*cachepool.Item[int64]{it, it2} {
		if _, err := it.Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	calls := 0
	msg := recoverPanic(func() {
		c.Evict(func(uint64) bool {
			calls++
			if calls == 2 {
				panic("keep boom")
			}
			return false
		})
	})
	if msg != "keep boom" {
		t.Fatalf("panic = %q, want the keep function's", msg)
	}
	if st := c.Stats(); st.Resident != 2 || st.Evictions != 0 {
		t.Errorf("after a panicking keep: %+v, want both items resident", st)
	}
	// The cache is not left locked.
	if got := c.Clear(); len(got) != 2 {
		t.Errorf("Clear = %x, want both keys", got)
	}
}

func TestEvictGen(t *testing.T) {
	ctx, c := newCtx(t)
	a := cachepool.Define(uniqueName(t, "a"), (&counter{}).build)
	b := cachepool.Define(uniqueName(t, "b"), (&counter{}).build)
	calls := 0
	keepOnly := func(keys ...uint64) func(uint64) bool {
		return func(k uint64) bool { calls++; return slices.Contains(keys, k) }
	}
	steps := []struct {
		name      string
		do        func() []uint64
		wantCalls int
		want      []uint64
	}{
		{"empty cache", func() []uint64 { return c.EvictGen(2, keepOnly()) }, 0, nil},
		{"build a", func() []uint64 { a.Get(ctx); return nil }, 0, nil},
		{"scan gen 2", func() []uint64 { return c.EvictGen(2, keepOnly(a.Key())) }, 1, nil},
		{"same gen, nothing built: no scan", func() []uint64 { return c.EvictGen(2, keepOnly(a.Key())) }, 0, nil},
		{"hit a: still no scan", func() []uint64 { a.Get(ctx); return c.EvictGen(2, keepOnly(a.Key())) }, 0, nil},
		{"build b: scan", func() []uint64 { b.Get(ctx); return c.EvictGen(2, keepOnly(a.Key())) }, 2, []uint64{b.Key()}},
		{"same gen again: no scan", func() []uint64 { return c.EvictGen(2, keepOnly(a.Key())) }, 0, nil},
		{"new gen: scan", func() []uint64 { return c.EvictGen(4, keepOnly()) }, 1, []uint64{a.Key()}},
		{"plain Evict always scans", func() []uint64 { a.Get(ctx); c.EvictGen(6, keepOnly(a.Key())); return c.Evict(keepOnly(a.Key())) }, 2, nil},
	}
	for _, s := range steps {
		calls = 0
		got := s.do()
		if calls != s.wantCalls || !slices.Equal(got, s.want) {
			t.Errorf("%s: keep called %d times, evicted %x; want %d, %x", s.name, calls, got, s.wantCalls, s.want)
		}
	}
}

func TestConcurrentGetsShareOneBuild(t *testing.T) {
	release := make(chan struct{})
	var builds atomic.Int32
	it := cachepool.Define(uniqueName(t, "slow"), func(context.Context) (*int, error) {
		builds.Add(1)
		<-release
		v := 42
		return &v, nil
	})
	ctx, c := newCtx(t)
	const n = 8
	var started, wg sync.WaitGroup
	got := make([]*int, n)
	errs := make([]error, n)
	started.Add(n)
	for i := range n {
		wg.Go(func() {
			started.Done()
			got[i], errs[i] = it.Get(ctx)
		})
	}
	started.Wait()
	for range 100 { // give the goroutines a chance to reach the wait
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || got[i] != got[0] || *got[i] != 42 {
			t.Errorf("caller %d: %p, %v; want the one value %p", i, got[i], errs[i], got[0])
		}
	}
	if b := builds.Load(); b != 1 {
		t.Errorf("%d builds, want 1", b)
	}
	if st := c.Stats(); st.Builds != 1 || st.Hits != n-1 {
		t.Errorf("Stats = %+v, want 1 miss and %d hits", st, n-1)
	}
}

func TestWaitersAndFailedBuild(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	var calls atomic.Int32
	it := cachepool.Define(uniqueName(t, "failing"), func(ctx context.Context) (int, error) {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
			return 0, errBuild
		}
		return 7, nil
	})
	ctx, _ := newCtx(t)
	first := make(chan error, 1)
	go func() {
		_, err := it.Get(ctx)
		first <- err
	}()
	<-entered
	// A waiter that gives up returns its own context's error.
	wctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := it.Get(wctx); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), it.Name()) {
		t.Errorf("cancelled waiter: %v, want context.Canceled naming the item", err)
	}
	close(release)
	if err := <-first; !errors.Is(err, errBuild) {
		t.Fatalf("first Get: %v, want the build's error", err)
	}
	if v, err := it.Get(ctx); err != nil || v != 7 {
		t.Errorf("Get after the failure = %d, %v; want a fresh build 7", v, err)
	}
}

func TestWaiterRetriesWhenBuilderGivesUp(t *testing.T) {
	entered := make(chan struct{})
	var calls atomic.Int32
	it := cachepool.Define(uniqueName(t, "abandoned"), func(ctx context.Context) (int, error) {
		if calls.Add(1) == 1 {
			close(entered)
			<-ctx.Done()
			return 0, ctx.Err()
		}
		return 9, nil
	})
	base, c := newCtx(t)
	bctx, cancel := context.WithCancel(base)
	first := make(chan error, 1)
	go func() {
		_, err := it.Get(bctx)
		first <- err
	}()
	<-entered
	waiter := make(chan int, 1)
	go func() {
		v, err := it.Get(base)
		if err != nil {
			t.Errorf("waiter: %v, want a value: its own context is live", err)
		}
		waiter <- v
	}()
	for range 100 {
		runtime.Gosched()
	}
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Errorf("builder: %v, want context.Canceled", err)
	}
	if v := <-waiter; v != 9 {
		t.Errorf("waiter got %d, want 9", v)
	}
	if !c.Has(it.Key()) {
		t.Error("item not resident after the waiter's build")
	}
}

func TestCycle(t *testing.T) {
	var a, b *cachepool.Item[int]
	a = cachepool.Define(uniqueName(t, "a"), func(ctx context.Context) (int, error) {
		v, err := b.Get(ctx)
		return v + 1, err
	})
	b = cachepool.Define(uniqueName(t, "b"), func(ctx context.Context) (int, error) {
		v, err := a.Get(ctx)
		return v + 1, err
	})
	var self *cachepool.Item[int]
	self = cachepool.Define(uniqueName(t, "self"), func(ctx context.Context) (int, error) {
		return self.Get(ctx)
	})
	ctx, c := newCtx(t)
	if _, err := self.Get(ctx); !errors.Is(err, cachepool.ErrCycle) {
		t.Errorf("self -> self: %v, want ErrCycle", err)
	}
	_, err := a.Get(ctx)
	if !errors.Is(err, cachepool.ErrCycle) || !strings.Contains(err.Error(), a.Name()) {
		t.Errorf("a -> b -> a: %v, want ErrCycle naming %q", err, a.Name())
	}
	if c.Has(a.Key()) || c.Has(b.Key()) {
		t.Error("a failed build left an item resident")
	}
	// The same item built in another cache is no cycle.
	other := cachepool.New()
	x := cachepool.Define(uniqueName(t, "x"), func(context.Context) (int, error) { return 1, nil })
	y := cachepool.Define(uniqueName(t, "y"), func(ctx context.Context) (int, error) {
		v, err := x.Get(cachepool.WithCache(ctx, other))
		return v + 1, err
	})
	if v, err := y.Get(ctx); err != nil || v != 2 {
		t.Errorf("y = %d, %v; want 2", v, err)
	}
}

func TestBuildGoexitReleasesWaiters(t *testing.T) {
	var calls atomic.Int32
	it := cachepool.Define(uniqueName(t, "goexit"), func(context.Context) (int, error) {
		if calls.Add(1) == 1 {
			runtime.Goexit()
		}
		return 5, nil
	})
	ctx, c := newCtx(t)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		it.Get(ctx)
		t.Error("Get returned although its build called Goexit")
	}()
	<-exited
	// Not stuck "building": the next Get builds again.
	if v, err := it.Get(ctx); err != nil || v != 5 {
		t.Errorf("Get after a Goexit build = %d, %v; want 5", v, err)
	}
	if st := c.Stats(); st.Builds != 2 {
		t.Errorf("Builds = %d, want 2", st.Builds)
	}
}

func TestGetDuringCleanupWaitsAndRebuilds(t *testing.T) {
	type value struct {
		n       int
		cleaned atomic.Bool
	}
	var inCleanup, violations atomic.Int32
	cleanupEntered := make(chan struct{})
	releaseCleanup := make(chan struct{})
	var builds atomic.Int32
	it := cachepool.Define(uniqueName(t, "slowclean"), func(context.Context) (*value, error) {
		if inCleanup.Load() != 0 {
			violations.Add(1)
		}
		return &value{n: int(builds.Add(1))}, nil
	}, cachepool.Cleanup(func(v *value) {
		inCleanup.Add(1)
		if v.n == 1 {
			close(cleanupEntered)
			<-releaseCleanup
		}
		v.cleaned.Store(true)
		inCleanup.Add(-1)
	}))
	ctx, c := newCtx(t)
	if _, err := it.Get(ctx); err != nil {
		t.Fatal(err)
	}
	evicted := make(chan []uint64, 1)
	go func() { evicted <- c.Clear() }()
	<-cleanupEntered
	// The eviction has been decided: the item is no longer resident, and a
	// Get started now must not return the value being cleaned up.
	if c.Has(it.Key()) {
		t.Error("Has is true while the item is being cleaned up")
	}
	got := make(chan *value, 1)
	go func() {
		v, err := it.Get(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- v
	}()
	for range 100 {
		runtime.Gosched()
	}
	close(releaseCleanup)
	v := <-got
	if v == nil || v.n != 2 || v.cleaned.Load() {
		t.Errorf("Get during cleanup returned %+v, want the fresh build 2", v)
	}
	if n := violations.Load(); n != 0 {
		t.Errorf("%d builds ran while a cleanup of the same item ran", n)
	}
	if keys := <-evicted; !slices.Equal(keys, []uint64{it.Key()}) {
		t.Errorf("Clear = %x", keys)
	}
}

// TestInterfaceValue checks items whose value type is an interface: a nil
// value is memoised like any other, and the io.Closer default applies.
func TestInterfaceValue(t *testing.T) {
	var closed atomic.Int32
	it := cachepool.Define(uniqueName(t, "iface"), func(context.Context) (io.Closer, error) {
		return closerFunc(func() error { closed.Add(1); return nil }), nil
	})
	nilIt := cachepool.Define(uniqueName(t, "nil"), func(context.Context) (io.Closer, error) { return nil, nil })
	ctx, c := newCtx(t)
	if v, err := nilIt.Get(ctx); err != nil || v != nil {
		t.Errorf("nil interface value: %v, %v", v, err)
	}
	if v, err := nilIt.Get(ctx); err != nil || v != nil {
		t.Errorf("nil interface value, hit: %v, %v", v, err)
	}
	if _, err := it.Get(ctx); err != nil {
		t.Fatal(err)
	}
	c.Clear()
	if closed.Load() != 1 {
		t.Errorf("closed %d times, want 1", closed.Load())
	}
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

func TestPanicWithErrorValue(t *testing.T) {
	errValue := errors.New("panicked with an error")
	it := cachepool.Define(uniqueName(t, "panicerr"), func(context.Context) (int, error) { panic(errValue) })
	ctx, _ := newCtx(t)
	_, err := it.Get(ctx)
	if !errors.Is(err, cachepool.ErrPanic) || !errors.Is(err, errValue) {
		t.Errorf("err = %v, want one matching ErrPanic and the panic value", err)
	}
	if want := fmt.Sprintf("cachepool: build %q: panic: panicked with an error", it.Name()); err == nil || err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}
