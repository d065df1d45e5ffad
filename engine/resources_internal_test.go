package engine

import (
	"slices"
	"testing"
)

// The counting of named resources: a job's amounts in the pool's order,
// the sums as places change, and what fits.
func TestNamedResourcesCounting(t *testing.T) {
	p := New(InProcess(2), Capacity(Resources{Named: map[string]int64{"licence": 1, "gpu": 2}}))
	cfg := &p.cfg
	if !slices.Equal(cfg.names, []string{"gpu", "licence"}) || !slices.Equal(cfg.named, []int64{2, 1}) {
		t.Fatalf("names %v, limits %v; want [gpu licence] [2 1]", cfg.names, cfg.named)
	}
	if !cfg.limited() {
		t.Fatal("a pool with named limits alone is not limited")
	}
	for _, tc := range []struct {
		name  string
		named map[string]int64
		want  []int64
	}{
		{"none", nil, nil},
		{"unlisted name, not counted", map[string]int64{"tape": 3}, nil},
		{"zero", map[string]int64{"gpu": 0}, nil},
		{"one of two", map[string]int64{"licence": 1, "tape": 3}, []int64{0, 1}},
		{"both", map[string]int64{"gpu": 2, "licence": 1}, []int64{2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cfg.namedCost(tc.named); !slices.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Errorf("namedCost(%v) = %#v, want %#v", tc.named, got, tc.want)
			}
		})
	}

	s := &scheduler{p: p}
	gpu := func(n int64) *job { return &job{named: cfg.namedCost(map[string]int64{"gpu": n})} }
	a, b := &place{}, &place{}
	one, two, three, plain := gpu(1), gpu(1), gpu(3), &job{}
	if !s.fits(three) {
		t.Error("with nothing in flight, a job that asks for more than the limit does not fit (it should run alone)")
	}
	a.inflight = []*job{one}
	s.recost(a)
	if !s.fits(two) || s.fits(three) || !s.fits(plain) {
		t.Errorf("gpu 1 of 2 in flight: fits(1) %v, fits(3) %v, fits(none) %v; want true false true", s.fits(two), s.fits(three), s.fits(plain))
	}
	b.inflight = []*job{two}
	s.recost(b)
	if s.fits(gpu(1)) || !s.fits(plain) {
		t.Errorf("gpu 2 of 2 in flight: fits(1) %v, fits(none) %v; want false true", s.fits(gpu(1)), s.fits(plain))
	}
	if !slices.Equal(s.usedNamed, []int64{2, 0}) {
		t.Errorf("used %v, want [2 0]", s.usedNamed)
	}
	a.inflight = nil
	s.recost(a)
	if !s.fits(gpu(1)) || !slices.Equal(s.usedNamed, []int64{1, 0}) {
		t.Errorf("after one ended: fits(1) %v, used %v; want true [1 0]", s.fits(gpu(1)), s.usedNamed)
	}
	b.inflight = nil
	s.recost(b)
	if !slices.Equal(s.usedNamed, []int64{0, 0}) || s.used.Slots != 0 {
		t.Errorf("nothing in flight: used %v and %d slots", s.usedNamed, s.used.Slots)
	}
}

// A pool without named resources counts its jobs without allocating, and
// its jobs carry no amounts.
func TestNamedResourcesCostNothingUnused(t *testing.T) {
	p := New(InProcess(1), Capacity(Resources{Slots: 4}))
	if n := p.cfg.namedCost(map[string]int64{"gpu": 1}); n != nil {
		t.Errorf("namedCost in a pool without named limits = %v, want nil", n)
	}
	s := &scheduler{p: p}
	pl := &place{inflight: []*job{{}, {cost: Resources{Slots: 2}}}}
	j := &job{}
	if n := testing.AllocsPerRun(100, func() { s.recost(pl); s.fits(j) }); n != 0 {
		t.Errorf("recost and fits allocate %v times a call", n)
	}
	if s.usedNamed != nil || pl.named != nil {
		t.Errorf("named sums %v, %v: want none", s.usedNamed, pl.named)
	}
}

// JobResources and Capacity copy Named, and refuse negative amounts.
func TestNamedResourcesOptions(t *testing.T) {
	m := map[string]int64{"gpu": 1}
	var o jobOptions
	JobResources(Resources{Named: m})(&o)
	m["gpu"] = 5
	if o.cost.Named["gpu"] != 1 {
		t.Errorf("JobResources shares the caller's map: gpu %d", o.cost.Named["gpu"])
	}
	for _, f := range []func(){
		func() { JobResources(Resources{Named: map[string]int64{"gpu": -1}}) },
		func() { Capacity(Resources{Named: map[string]int64{"gpu": -1}}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("a negative named amount did not panic")
				}
			}()
			f()
		}()
	}
}
