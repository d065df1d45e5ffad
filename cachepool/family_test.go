package cachepool_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/poolrun/poolrun/cachepool"
)

type cellType struct {
	Name    string
	Density int
}

func TestFamily(t *testing.T) {
	prefix := uniqueName(t, "cells")
	var mu sync.Mutex
	built := map[string]int{}
	cleaned := map[string]int{}
	fam := cachepool.DefineFamily(prefix, func(ctx context.Context, p string) ([]byte, error) {
		mu.Lock()
		built[p]++
		mu.Unlock()
		return []byte("table of " + p), nil
	},
		cachepool.Cleanup(func(b []byte) { cleaned[string(b)]++ }),
		cachepool.Size(func(b []byte) int64 { return int64(len(b)) }))

	if fam.Prefix() != prefix {
		t.Errorf("Prefix = %q, want %q", fam.Prefix(), prefix)
	}
	granuleKey := cachepool.Key(prefix + ":granule")
	if _, ok := cachepool.Lookup(granuleKey); ok {
		t.Fatal("Lookup finds a member that was never made")
	}
	g := fam.Item("granule")
	if g != fam.Item("granule") {
		t.Error("Item is not memoised per parameter")
	}
	p := fam.Item("purkinje")
	if p == g {
		t.Error("two parameters share one item")
	}
	if g.Name() != prefix+":granule" || g.Key() != granuleKey {
		t.Errorf("member name %q key %x, want %q %x", g.Name(), g.Key(), prefix+":granule", granuleKey)
	}
	if h, ok := cachepool.Lookup(granuleKey); !ok || h != cachepool.Handle(g) {
		t.Errorf("Lookup(member key) = %v, %v; want the member", h, ok)
	}

	// Members behave like static items: Get, hits, Evict, Stats.
	ctx, c := newCtx(t)
	for range 3 {
		for _, it := range []*cachepool.Item[[]byte]{g, p} {
			v, err := it.Get(ctx)
			if want := "table of " + strings.TrimPrefix(it.Name(), prefix+":"); err != nil || string(v) != want {
				t.Fatalf("%s: Get = %q, %v; want %q", it.Name(), v, err, want)
			}
		}
	}
	if built["granule"] != 1 || built["purkinje"] != 1 {
		t.Errorf("builds %v, want one per member", built)
	}
	if st := c.Stats(); st.Hits != 4 || st.Builds != 2 || st.Bytes != int64(len("table of granule")+len("table of purkinje")) {
		t.Errorf("Stats = %+v", st)
	}
	if got := c.Evict(func(k uint64) bool { return k == g.Key() }); !slices.Equal(got, []uint64{p.Key()}) {
		t.Errorf("Evict = %x, want [%x]", got, p.Key())
	}
	if cleaned["table of purkinje"] != 1 || cleaned["table of granule"] != 0 {
		t.Errorf("cleanups %v, want one for purkinje", cleaned)
	}
}

func TestFamilyConcurrentItem(t *testing.T) {
	fam := cachepool.DefineFamily(uniqueName(t, "conc"), func(ctx context.Context, p int) (int, error) { return p * p, nil })
	const goroutines, params = 8, 50
	got := make([][]*cachepool.Item[int], goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for p := range params {
				got[g] = append(got[g], fam.Item(p))
			}
		})
	}
	wg.Wait() // a double registration would have panicked
	for g := range goroutines {
		for p := range params {
			if got[g][p] != got[0][p] {
				t.Fatalf("goroutine %d got another item for %d", g, p)
			}
		}
	}
}

func TestFamilyNamesAndMisuse(t *testing.T) {
	build := func(ctx context.Context, p cellType) (int, error) { return p.Density, nil }

	named := cachepool.DefineFamily(uniqueName(t, "named"), build,
		cachepool.MemberName(func(p cellType) string { return p.Name }))
	if it := named.Item(cellType{"golgi", 3}); it.Name() != named.Prefix()+":golgi" {
		t.Errorf("MemberName: name %q, want %q", it.Name(), named.Prefix()+":golgi")
	}
	plain := cachepool.DefineFamily(uniqueName(t, "plain"), build)
	if it := plain.Item(cellType{"golgi", 3}); it.Name() != plain.Prefix()+":"+fmt.Sprint(cellType{"golgi", 3}) {
		t.Errorf("default name %q, want prefix:fmt.Sprint(p)", it.Name())
	}
	ptrs := cachepool.DefineFamily(uniqueName(t, "ptrs"),
		func(ctx context.Context, p *cellType) (int, error) { return p.Density, nil },
		cachepool.MemberName(func(p *cellType) string { return p.Name }))
	if it := ptrs.Item(&cellType{"basket", 1}); it.Name() != ptrs.Prefix()+":basket" {
		t.Errorf("pointer family with MemberName: %q", it.Name())
	}

	dupPrefix := uniqueName(t, "dup")
	cachepool.DefineFamily(dupPrefix, build)
	taken := uniqueName(t, "taken")
	static := cachepool.Define(taken+":x", func(context.Context) (int, error) { return 0, nil })
	clash := cachepool.DefineFamily(taken, func(ctx context.Context, p string) (int, error) { return 0, nil })

	tests := []misuse{
		{
			name: "duplicate prefix",
			f:    func() { cachepool.DefineFamily(dupPrefix, build) },
			want: []string{"cachepool:", dupPrefix, "defined twice", "family_test.go:"},
		},
		{
			name: "member name taken by a static item",
			f:    func() { clash.Item("x") },
			want: []string{"cachepool:", static.Name(), "defined twice", "int"},
		},
		{
			name: "the same member again panics again",
			f:    func() { clash.Item("x") },
			want: []string{"defined twice"},
		},
		{
			name: "two parameters with one name",
			f: func() {
				named.Item(cellType{"stellate", 1})
				named.Item(cellType{"stellate", 2})
			},
			want: []string{"defined twice", named.Prefix() + ":stellate"},
		},
		{
			name: "pointer parameters without MemberName",
			f: func() {
				cachepool.DefineFamily(uniqueName(t, "ptr"), func(ctx context.Context, p *int) (int, error) { return 0, nil })
			},
			want: []string{"cachepool:", "*int", "MemberName"},
		},
		{
			name: "empty prefix",
			f:    func() { cachepool.DefineFamily("", build) },
			want: []string{"cachepool:", "empty prefix"},
		},
		{
			name: "nil build",
			f:    func() { cachepool.DefineFamily[int, int](uniqueName(t, "nilbuild"), nil) },
			want: []string{"cachepool:", "nil build"},
		},
		{
			name: "option of another value type",
			f: func() {
				cachepool.DefineFamily(uniqueName(t, "opt"), build, cachepool.Size(func(string) int64 { return 0 }))
			},
			want: []string{"Size(func(string) int64)", "int"},
		},
		{
			name: "MemberName of another parameter type",
			f: func() {
				cachepool.DefineFamily(uniqueName(t, "opt2"), build, cachepool.MemberName(func(int) string { return "" }))
			},
			want: []string{"MemberName(func(int) string)"},
		},
		{
			name: "MemberName twice",
			f: func() {
				n := cachepool.MemberName(func(p cellType) string { return p.Name })
				cachepool.DefineFamily(uniqueName(t, "opt3"), build, n, n)
			},
			want: []string{"MemberName given twice"},
		},
	}
	checkPanics(t, tests)
	if h, ok := cachepool.Lookup(cachepool.Key(taken + ":x")); !ok || h != cachepool.Handle(static) {
		t.Errorf("the clash replaced the static item in the registry: %v", h)
	}
}
