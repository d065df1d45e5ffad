package cachepool_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cachepool"
)

func TestEvictLRU(t *testing.T) {
	// Items 0..4 of these sizes (-1: no Size), built in order and then hit
	// in the order of use, so that the least recently used comes first in
	// use.
	sizes := []int64{100, 200, 300, 400, -1}
	tests := []struct {
		name      string
		use       []int // after building all in order
		target    int64
		keep      []int // nil: a nil keep
		want      []int // evicted items, in order
		wantCalls int   // calls of keep; -1: do not check
	}{
		{"under target: nothing, keep not called", nil, 2000, []int{}, nil, 0},
		{"at target: nothing", nil, 1000, []int{}, nil, 0},
		{"least recently built first", nil, 700, nil, []int{0, 1}, -1},
		{"one is enough", nil, 999, nil, []int{0}, -1},
		{"a hit saves an item", []int{0}, 700, nil, []int{1, 2}, -1},
		{"use order, not size", []int{3, 2, 1, 0}, 900, nil, []int{4, 3}, -1},
		{"target 0: until nothing is counted", nil, 0, nil, []int{0, 1, 2, 3}, -1},
		{"negative target: everything", nil, -5, nil, []int{0, 1, 2, 3, 4}, -1},
		{"an item without Size goes in its turn", []int{0, 1, 2, 3}, 900, nil, []int{4, 0}, -1},
		{"keep spares the least recently used", nil, 700, []int{0}, []int{1, 2}, 5},
		{"keep spares all: nil", nil, 0, []int{0, 1, 2, 3, 4}, nil, 5},
		{"not enough candidates: all of them", nil, 0, []int{3}, []int{0, 1, 2, 4}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, c := newCtx(t)
			var mu sync.Mutex
			var cleaned []int64
			items := make([]*cachepool.Item[int64], len(sizes))
			for i, n := range sizes {
				opts := []cachepool.Option{cachepool.Cleanup(func(v int64) { mu.Lock(); cleaned = append(cleaned, v); mu.Unlock() })}
				if n >= 0 {
					opts = append(opts, cachepool.Size(func(int64) int64 { return n }))
				}
				items[i] = cachepool.Define(uniqueName(t, "item"), func(context.Context) (int64, error) { return int64(i), nil }, opts...)
			}
			getAll(t, ctx, items, 0, 1, 2, 3, 4)
			getAll(t, ctx, items, tt.use...)
			before := c.Stats()

			var keep func(uint64) bool
			calls := 0
			if tt.keep != nil {
				keep = func(k uint64) bool {
					calls++
					return slices.ContainsFunc(tt.keep, func(i int) bool { return items[i].Key() == k })
				}
			}
			got := c.EvictLRU(tt.target, keep)

			var want []uint64
			var wantCleaned []int64
			var freed int64
			for _, i := range tt.want {
				want = append(want, items[i].Key())
				wantCleaned = append(wantCleaned, int64(i))
				freed += max(sizes[i], 0)
			}
			if !slices.Equal(got, want) {
				t.Errorf("EvictLRU(%d) = %x, want %x (items %v)", tt.target, got, want, tt.want)
			}
			if !slices.Equal(cleaned, wantCleaned) {
				t.Errorf("cleanups ran for items %v, want %v in the same order", cleaned, wantCleaned)
			}
			if tt.wantCalls >= 0 && calls != tt.wantCalls {
				t.Errorf("keep called %d times, want %d", calls, tt.wantCalls)
			}
			st := c.Stats()
			if st.Bytes != before.Bytes-freed || st.Resident != before.Resident-len(tt.want) ||
				st.Evictions != uint64(len(tt.want)) || st.PeakBytes != before.PeakBytes {
				t.Errorf("Stats = %+v, want Bytes %d Resident %d Evictions %d PeakBytes %d",
					st, before.Bytes-freed, before.Resident-len(tt.want), len(tt.want), before.PeakBytes)
			}
			if len(tt.want) > 0 && len(tt.want) < len(sizes)-len(tt.keep) && st.Bytes > tt.target {
				t.Errorf("Bytes %d over target %d with candidates left", st.Bytes, tt.target)
			}
			for i, it := range items {
				if c.Has(it.Key()) == slices.Contains(tt.want, i) {
					t.Errorf("item %d: Has = %v", i, c.Has(it.Key()))
				}
			}
			// Evicted items build again on the next Get.
			for _, i := range tt.want {
				if v, err := items[i].Get(ctx); err != nil || v != int64(i) || !c.Has(items[i].Key()) {
					t.Errorf("Get of evicted item %d = %d, %v", i, v, err)
				}
			}
		})
	}
}

func TestEvictLRUPanickingKeepChangesNothing(t *testing.T) {
	ctx, c := newCtx(t)
	items := sizedItems(t, 10, 20)
	getAll(t, ctx, items, 0, 1)
	v := c.Version()
	msg := recoverPanic(func() {
		c.EvictLRU(0, func(k uint64) bool {
			if k == items[1].Key() {
				panic("keep boom")
			}
			return false
		})
	})
	if msg != "keep boom" {
		t.Fatalf("panic = %q, want the keep function's", msg)
	}
	if st := c.Stats(); st.Resident != 2 || st.Evictions != 0 || st.Bytes != 30 || c.Version() != v {
		t.Errorf("after a panicking keep: %+v, version %d (was %d); want both items resident", st, c.Version(), v)
	}
	if got := c.EvictLRU(0, nil); len(got) != 2 {
		t.Errorf("EvictLRU after the panic = %x, want both keys: the cache is not left locked", got)
	}
}

// TestEvictLRULeavesBuildsAlone evicts with a target of 0 while a build is
// in progress: the item being built is not resident, is not offered to
// keep, and is memoised when its build ends.
func TestEvictLRULeavesBuildsAlone(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	slow := cachepool.Define(uniqueName(t, "slow"), func(context.Context) (int64, error) {
		close(entered)
		<-release
		return 5, nil
	}, cachepool.Size(func(v int64) int64 { return v }))
	ctx, c := newCtx(t)
	items := sizedItems(t, 10)
	getAll(t, ctx, items, 0)
	done := make(chan error, 1)
	go func() {
		_, err := slow.Get(ctx)
		done <- err
	}()
	<-entered
	got := c.EvictLRU(0, func(k uint64) bool {
		if k == slow.Key() {
			t.Error("keep asked about an item being built")
		}
		return false
	})
	if !slices.Equal(got, []uint64{items[0].Key()}) {
		t.Errorf("EvictLRU during a build = %x, want only the resident item", got)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); !c.Has(slow.Key()) || st.Bytes != 5 || st.Resident != 1 {
		t.Errorf("after the build: Has %v, %+v; want it resident with 5 bytes", c.Has(slow.Key()), st)
	}
}

func TestSetBeforeBuild(t *testing.T) {
	type call struct {
		key       uint64
		lastBytes int64
	}
	var calls []call
	var order []string
	ctx, c := newCtx(t)
	var size atomic.Int64
	size.Store(100)
	var fail atomic.Bool
	grows := cachepool.Define(uniqueName(t, "grows"), func(context.Context) (int64, error) {
		order = append(order, "build")
		if fail.Load() {
			return 0, errBuild
		}
		return size.Load(), nil
	}, cachepool.Size(func(v int64) int64 { return v }))
	unsized := cachepool.Define(uniqueName(t, "unsized"), func(context.Context) (int64, error) { return 1, nil })
	c.SetBeforeBuild(func(key uint64, lastBytes int64) {
		order = append(order, "before")
		calls = append(calls, call{key, lastBytes})
		// Without c's lock: its methods work, evicting ones included.
		c.Stats()
		c.EvictLRU(1<<40, nil)
	})
	evictAll := func() { c.Clear() }

	steps := []struct {
		name string
		do   func()
		want []call // calls of fn during the step
	}{
		{"first build: 0", func() { grows.Get(ctx) }, []call{{grows.Key(), 0}}},
		{"hit: no call", func() { grows.Get(ctx) }, nil},
		{"rebuild: the last size", func() { evictAll(); size.Store(250); grows.Get(ctx) }, []call{{grows.Key(), 100}}},
		{"again: the new size", func() { evictAll(); grows.Get(ctx) }, []call{{grows.Key(), 250}}},
		{"failed build: called, size kept", func() { evictAll(); fail.Store(true); grows.Get(ctx) }, []call{{grows.Key(), 250}}},
		{"after the failure", func() { fail.Store(false); size.Store(7); grows.Get(ctx) }, []call{{grows.Key(), 250}}},
		{"without Size: 0", func() { unsized.Get(ctx); evictAll(); unsized.Get(ctx) }, []call{{unsized.Key(), 0}, {unsized.Key(), 0}}},
		{"nil removes it", func() { c.SetBeforeBuild(nil); evictAll(); grows.Get(ctx) }, nil},
	}
	for _, s := range steps {
		calls = nil
		s.do()
		if !slices.Equal(calls, s.want) {
			t.Errorf("%s: calls %v, want %v", s.name, calls, s.want)
		}
	}
	if want := []string{"before", "build"}; !slices.Equal(order[:2], want) {
		t.Errorf("order %v, want fn before the build", order[:2])
	}

	// Another cache keeps its own last sizes.
	other := cachepool.New()
	var got []call
	other.SetBeforeBuild(func(key uint64, lastBytes int64) { got = append(got, call{key, lastBytes}) })
	if _, err := grows.Get(cachepool.WithCache(ctx, other)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []call{{grows.Key(), 0}}) {
		t.Errorf("first build in another cache: calls %v, want lastBytes 0", got)
	}
}

// TestBeforeBuildMakesRoom is the use SetBeforeBuild is for: a budget held
// by evicting, before each build, the least recently used items that the
// job at hand (here: one that needs item 0) does not need.
func TestBeforeBuildMakesRoom(t *testing.T) {
	const budget = 1000
	ctx, c := newCtx(t)
	items := sizedItems(t, 400, 400, 400, 400)
	c.SetBeforeBuild(func(key uint64, lastBytes int64) {
		c.EvictLRU(budget-lastBytes, func(k uint64) bool { return k == items[0].Key() })
	})
	steps := []struct {
		name     string
		get      []int
		resident []int
	}{
		{"two fit", []int{0, 1}, []int{0, 1}},
		{"a first build has no estimate: over budget", []int{2}, []int{0, 1, 2}},
		{"a hit", []int{1}, []int{0, 1, 2}},
		{"back to the budget, no room for the unknown", []int{3}, []int{0, 1, 3}},
		{"a rebuild makes room for its last size, sparing 0", []int{2}, []int{0, 2}},
	}
	for _, s := range steps {
		getAll(t, ctx, items, s.get...)
		var want []uint64
		var bytes int64
		for _, i := range s.resident {
			want = append(want, items[i].Key())
			bytes += 400
		}
		if got := residentKeys(c); !slices.Equal(got, sorted(want)) {
			t.Errorf("%s: resident %x, want items %v", s.name, got, s.resident)
		}
		if st := c.Stats(); st.Bytes != bytes {
			t.Errorf("%s: Bytes %d, want %d", s.name, st.Bytes, bytes)
		}
	}
}

func TestBeforeBuildFailures(t *testing.T) {
	tests := []struct {
		name       string
		fn         func(key uint64, lastBytes int64)
		wantReport bool
		wantErr    error // of the Get that builds
	}{
		{"panic: reported, the build goes ahead", func(uint64, int64) { panic("before boom") }, true, nil},
		{"Goexit: the build does not run", func(uint64, int64) { runtime.Goexit() }, false, cachepool.ErrBuildExited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var builds atomic.Int32
			it := cachepool.Define(uniqueName(t, "item"), func(context.Context) (int, error) {
				builds.Add(1)
				return 3, nil
			})
			c := cachepool.New()
			var reports []error
			c.SetErrorHandler(func(name string, err error) {
				if name != it.Name() {
					t.Errorf("report names %q, want %q", name, it.Name())
				}
				reports = append(reports, err)
			})
			ctx := cachepool.WithCache(t.Context(), c)
			c.SetBeforeBuild(tt.fn)

			type result struct {
				v   int
				err error
			}
			res := make(chan result, 1)
			go func() {
				defer close(res)
				v, err := it.Get(ctx)
				res <- result{v, err}
			}()
			r, returned := <-res
			switch {
			case tt.wantErr == nil && (!returned || r.err != nil || r.v != 3 || builds.Load() != 1):
				t.Errorf("Get = %+v (returned %v), %d builds; want 3 from one build", r, returned, builds.Load())
			case tt.wantErr != nil && (returned || builds.Load() != 0):
				t.Errorf("Get returned %+v, %d builds; want its goroutine gone and no build", r, builds.Load())
			}
			if tt.wantReport {
				var pe *cachepool.PanicError
				if len(reports) != 1 || !errors.As(reports[0], &pe) || pe.Op != "before build" ||
					!strings.Contains(reports[0].Error(), it.Name()) || !strings.Contains(reports[0].Error(), "before boom") {
					t.Errorf("reports %v, want one *PanicError with Op \"before build\" naming the item", reports)
				}
			} else if len(reports) != 0 {
				t.Errorf("reports %v, want none", reports)
			}
			// The cache is not stuck: without fn, the next Get builds or hits.
			c.SetBeforeBuild(nil)
			if v, err := it.Get(ctx); err != nil || v != 3 {
				t.Errorf("next Get = %d, %v; want 3", v, err)
			}
		})
	}
}

func TestBeforeBuildTimeIsNotBuildTime(t *testing.T) {
	const pause = 100 * time.Millisecond
	ctx, c := newCtx(t)
	it := cachepool.Define(uniqueName(t, "quick"), (&counter{}).build)
	c.SetBeforeBuild(func(uint64, int64) { time.Sleep(pause) })
	start := time.Now()
	if _, err := it.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if took, bt := time.Since(start), c.Stats().BuildTime; took < pause || bt >= pause {
		t.Errorf("Get took %v, BuildTime %v; want fn's %v in the first and not in the second", took, bt, pause)
	}
}
