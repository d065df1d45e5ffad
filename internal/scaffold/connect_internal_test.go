package scaffold

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestConnectAgainstReference compares Connect with a direct reading of its
// documentation: brute-force candidates, each pair's number, the probability
// filter, the smallest numbers up to the limit.
func TestConnectAgainstReference(t *testing.T) {
	t.Parallel()
	const src = `seed: 11
box: {size: [120, 120, 60], chunk: [40, 40, 60]}
cell_types:
  - {name: s, density: 2e6}
  - {name: t, density: 3e5}
connections:
  - {name: limited, from: s, to: t, max_distance: 15, max_per_target: 5}
  - {name: sparse, from: s, to: t, max_distance: 10, probability: 0.3}
  - {name: both, from: t, to: t, max_distance: 25, probability: 0.6, max_per_target: 2}
`
	cfg, err := ParseConfig("ref.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pos := map[string][][3]float32{}
	for _, typ := range cfg.CellTypes {
		for _, ch := range cfg.Chunks() {
			if _, err := Place(cfg, typ.Name, ch, dir); err != nil {
				t.Fatal(err)
			}
			p, err := readPositions(cfg, typ.Name, ch, dir)
			if err != nil {
				t.Fatal(err)
			}
			pos[typ.Name] = append(pos[typ.Name], p...)
		}
	}
	for _, rule := range cfg.Rules {
		ix, err := BuildIndex(cfg, rule.From, dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		key := seedOf(cfg.Seed, "connect", rule.Name)
		prob := cmp.Or(rule.Probability, 1)
		var got, want [][2]uint32
		candidates := 0
		for _, ch := range cfg.Chunks() {
			if _, err := Connect(cfg, rule, ch, ix, dir); err != nil {
				t.Fatal(err)
			}
			pairs, err := readConnections(cfg, rule.Name, ch, dir)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, pairs...)
		}
		for tg, p := range pos[rule.To] {
			var keep []candidate
			r := float32(rule.MaxDistance)
			for s, q := range pos[rule.From] {
				dx, dy, dz := q[0]-p[0], q[1]-p[1], q[2]-p[2]
				if float32(dx*dx)+float32(dy*dy)+float32(dz*dz) > r*r || rule.From == rule.To && s == tg {
					continue
				}
				candidates++
				k := pairKey(key, uint32(s), uint32(tg))
				if float64(k>>11)*0x1p-53 < prob { // u has 53 bits
					keep = append(keep, candidate{k, uint32(s)})
				}
			}
			slices.SortFunc(keep, func(a, b candidate) int { return cmp.Compare(a.key, b.key) })
			if rule.MaxPerTarget > 0 && len(keep) > rule.MaxPerTarget {
				keep = keep[:rule.MaxPerTarget]
			}
			slices.SortFunc(keep, func(a, b candidate) int { return cmp.Compare(a.id, b.id) })
			for _, c := range keep {
				want = append(want, [2]uint32{c.id, uint32(tg)})
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %d pairs, reference %d", rule.Name, len(got), len(want))
		}
		if rule.Name == "sparse" {
			// The filter keeps about Probability of the candidates.
			f := float64(len(got)) / float64(candidates)
			if sd := math.Sqrt(prob * (1 - prob) / float64(candidates)); candidates < 1000 || math.Abs(f-prob) > 5*sd {
				t.Errorf("%s: kept %d of %d candidates (%.3f), want about %g", rule.Name, len(got), candidates, f, prob)
			}
		}
		t.Logf("%s: %d pairs of %d candidates", rule.Name, len(got), candidates)
	}
}

func TestSelectionKeepsSmallest(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	for range 200 {
		n, limit := rng.IntN(60), rng.IntN(10)
		var all []candidate
		var sel selection
		for i := range n {
			c := candidate{rng.Uint64() >> rng.IntN(64), uint32(i)}
			all = append(all, c)
			sel.offer(c.key, c.id, limit)
		}
		slices.SortFunc(all, func(a, b candidate) int { return cmp.Compare(a.key, b.key) })
		if limit > 0 && len(all) > limit {
			all = all[:limit]
		}
		var want []uint32
		for _, c := range all {
			want = append(want, c.id)
		}
		got := sel.ids(nil)
		slices.Sort(got)
		slices.Sort(want)
		// Keys may tie here (unlike pairKey's); compare the keys kept.
		if len(got) != len(want) {
			t.Fatalf("n=%d limit=%d: kept %d, want %d", n, limit, len(got), len(want))
		}
		var gk, wk []uint64
		for _, c := range sel.heap {
			gk = append(gk, c.key)
		}
		for _, c := range all {
			wk = append(wk, c.key)
		}
		slices.Sort(gk)
		slices.Sort(wk)
		if !slices.Equal(gk, wk) {
			t.Fatalf("n=%d limit=%d: kept keys %v, want %v", n, limit, gk, wk)
		}
	}
}

func TestPairKeyDistinct(t *testing.T) {
	// mix is a bijection, so distinct pairs get distinct numbers: spot-check
	// a dense block of pairs.
	seen := map[uint64]bool{}
	for s := range uint32(300) {
		for tg := range uint32(300) {
			k := pairKey(12345, s, tg)
			if seen[k] {
				t.Fatalf("pair (%d, %d) repeats a number", s, tg)
			}
			seen[k] = true
		}
	}
}
