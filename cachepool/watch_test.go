package cachepool_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/cachepool"
)

var (
	watchA   = cachepool.Define("watch-test-a", func(context.Context) (int, error) { return 1, nil })
	watchB   = cachepool.Define("watch-test-b", func(ctx context.Context) (int, error) { return 2, nil })
	watchDep = cachepool.Define("watch-test-dep", func(context.Context) (int, error) { return 3, nil })
	// watchTop's build gets watchDep: that Get is watchTop's, not the job's.
	watchTop = cachepool.Define("watch-test-top", func(ctx context.Context) (int, error) {
		v, err := watchDep.Get(ctx)
		return v + 1, err
	})
	watchFam = cachepool.DefineFamily("watch-test-fam", func(_ context.Context, n int) (int, error) { return n, nil })
)

func TestWatch(t *testing.T) {
	c := cachepool.New()
	ctx := cachepool.WithCache(context.Background(), c)
	w := cachepool.NewWatch(sortedKeys(watchA.Key(), watchTop.Key()), false)
	c.SetWatch(w)
	for range 3 {
		for _, get := range []func(context.Context) (int, error){watchA.Get, watchB.Get, watchTop.Get, watchFam.Item(7).Get} {
			if _, err := get(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := w.Found()
	want := []cachepool.Undeclared{
		{Name: "watch-test-b", Key: watchB.Key()},
		{Name: "watch-test-fam:7", Key: watchFam.Item(7).Key(), Family: "watch-test-fam"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("found %+v, want %+v (watch-test-dep is got by a build, not the job)", got, want)
	}

	w.Reset(sortedKeys(watchB.Key()))
	if _, err := watchB.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if f := w.Found(); len(f) != 0 {
		t.Errorf("after Reset with b declared: found %+v", f)
	}

	c.SetWatch(nil)
	if _, err := watchA.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if f := w.Found(); len(f) != 0 {
		t.Errorf("a Get without a watch was noted: %+v", f)
	}
}

func TestWatchStrict(t *testing.T) {
	c := cachepool.New()
	ctx := cachepool.WithCache(context.Background(), c)
	w := cachepool.NewWatch(sortedKeys(watchA.Key()), true)
	c.SetWatch(w)
	if _, err := watchA.Get(ctx); err != nil {
		t.Fatalf("declared item: %v", err)
	}
	builds := c.Stats().Builds
	for range 2 { // every Get of it fails, not only the first
		_, err := watchB.Get(ctx)
		if !errors.Is(err, cachepool.ErrUndeclared) {
			t.Fatalf("undeclared item under a strict watch: err %v, want ErrUndeclared", err)
		}
		if want := `"watch-test-b"`; !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name the item (%s)", err, want)
		}
	}
	if b := c.Stats().Builds; b != builds {
		t.Errorf("the undeclared item was built (%d builds, want %d)", b, builds)
	}
	if f := w.Found(); len(f) != 1 || f[0].Key != watchB.Key() {
		t.Errorf("found %+v, want watch-test-b once", f)
	}
}

func sortedKeys(ks ...uint64) []uint64 {
	slices.Sort(ks)
	return ks
}

func BenchmarkGetHitWatched(b *testing.B) {
	c := cachepool.New()
	ctx := cachepool.WithCache(context.Background(), c)
	c.SetWatch(cachepool.NewWatch(sortedKeys(watchA.Key()), false))
	if _, err := watchA.Get(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		watchA.Get(ctx)
	}
}
