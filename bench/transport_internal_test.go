package bench

import (
	"context"
	"slices"
	"testing"

	"github.com/poolrun/poolrun/engine"
)

// TestMessageDesign checks the alternative design of
// BenchmarkRequiredSetTransport: the parent's set follows the counts, and
// a worker evicts what the message's set does not list, and only that.
func TestMessageDesign(t *testing.T) {
	var r refCounts
	for _, k := range []uint64{30, 10, 20, 10} {
		r.add(k)
	}
	r.drop(10)
	r.drop(30)
	if !slices.Equal(r.keys, []uint64{10, 20}) {
		t.Fatalf("set %v after adding 30, 10, 20, 10 and dropping 10, 30; want [10 20]", r.keys)
	}

	tests := []struct {
		name   string
		second []uint64 // the set the second job carries
		builds uint64
	}{
		{"still listed", []uint64{residentItem.Key()}, 1},
		{"no longer listed", nil, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := engine.New(engine.Workers(0), engine.Evict(engine.EvictNever))
			var first, second refCounts
			first.add(residentItem.Key())
			for _, k := range tc.second {
				second.add(k)
			}
			j := engine.Queue(p, viaMessage, first.encode())
			engine.Queue(p, viaMessage, second.encode(), engine.After(j))
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := p.Stats().Workers[0].Cache.Builds; got != tc.builds {
				t.Errorf("%d builds of the resident item, want %d", got, tc.builds)
			}
		})
	}
}
