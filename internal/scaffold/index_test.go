package scaffold

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// small is one cell type in a box of 4 × 3 × 2 chunks: about 3000 cells.
const small = `seed: 3
box:
  size: [200, 150, 100]
  chunk: 50
cell_types:
  - name: p
    density: 1e6
connections:
  - name: p_to_p
    from: p
    to: p
    max_distance: 12
`

// placeSmall places the small configuration in a new folder and returns it
// with every position by global id.
func placeSmall(t *testing.T) (*Config, string, [][3]float32) {
	t.Helper()
	cfg, err := ParseConfig("small.yaml", []byte(small))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var all [][3]float32
	for _, ch := range cfg.Chunks() {
		n, err := Place(cfg, "p", ch, dir)
		if err != nil {
			t.Fatal(err)
		}
		first, _ := cfg.firstID("p", ch)
		if int(first) != len(all) {
			t.Fatalf("FirstID(%v) = %d, want %d", ch, first, len(all))
		}
		pos, err := readPositions(cfg, "p", ch, dir)
		if err != nil || len(pos) != n {
			t.Fatalf("ReadPositions: %d positions, %v; Place said %d", len(pos), err, n)
		}
		all = append(all, pos...)
	}
	return cfg, dir, all
}

// within is the brute-force answer, with Within's documented test.
func within(all [][3]float32, p [3]float32, r float32) []uint32 {
	var out []uint32
	for id, q := range all {
		dx, dy, dz := q[0]-p[0], q[1]-p[1], q[2]-p[2]
		if float32(dx*dx)+float32(dy*dy)+float32(dz*dz) <= r*r {
			out = append(out, uint32(id))
		}
	}
	return out
}

func TestIndexAgainstBruteForce(t *testing.T) {
	t.Parallel()
	cfg, dir, all := placeSmall(t)
	if len(all) < 2000 {
		t.Fatalf("only %d cells", len(all))
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, cell := range []float64{0, 3, 12, 37, 1e-3 /* capped */, 1e6 /* one grid cell */} {
		t.Run(fmt.Sprintf("cell=%g", cell), func(t *testing.T) {
			ix, err := BuildIndex(cfg, "p", dir, cell)
			if err != nil {
				t.Fatal(err)
			}
			if len(ix.ids) != len(all) || ix.cellType != "p" {
				t.Fatalf("the index holds %d cells of type %q; want %d, p", len(ix.ids), ix.cellType, len(all))
			}
			if cell > 0 && cell < 1 && ix.size <= cell {
				t.Errorf("grid cells of %g µm: a grid of %g µm cells was not capped", ix.size, cell)
			}
			if cell == 0 && ix.size != 12 {
				t.Errorf("grid cells of %g µm, want the rule's distance 12", ix.size)
			}
			if b := ix.Bytes(); b < 16*int64(len(all)) || b > 64*int64(len(all))+1<<20 {
				t.Errorf("Bytes() = %d for %d cells", b, len(all))
			}
			for i := range 300 {
				var p [3]float32
				for d := range 3 {
					// Inside the box and up to 30 µm outside it.
					p[d] = float32(-30 + rng.Float64()*(cfg.Box.Size[d]+60))
				}
				if i%3 == 0 { // on a cell, often exactly at another's distance
					p = all[rng.IntN(len(all))]
				}
				r := float32(rng.Float64() * 40)
				if i == 0 {
					r = 0
				}
				if i == 1 {
					r = 1e4 // everything
				}
				want := within(all, p, r)
				var got []uint32
				ix.within(p, r, func(id uint32, q [3]float32) bool {
					if q != all[id] {
						t.Errorf("id %d reported at %v, placed at %v", id, q, all[id])
					}
					got = append(got, id)
					return true
				})
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Fatalf("Within(%v, %g): %d cells, brute force %d", p, r, len(got), len(want))
				}
				if i == 1 && len(got) != len(all) {
					t.Errorf("Within(r=1e4) found %d of %d", len(got), len(all))
				}
			}
		})
	}
}

func TestIndexStopsEarly(t *testing.T) {
	t.Parallel()
	cfg, dir, _ := placeSmall(t)
	ix, err := BuildIndex(cfg, "p", dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	ix.within([3]float32{100, 75, 50}, 50, func(uint32, [3]float32) bool {
		calls++
		return calls < 3
	})
	if calls != 3 {
		t.Errorf("fn called %d times after returning false on the third", calls)
	}
	calls = 0
	ix.within([3]float32{100, 75, 50}, -1, func(uint32, [3]float32) bool { calls++; return true })
	if calls != 0 {
		t.Errorf("negative radius: %d calls", calls)
	}
}

// TestConnectSelf checks the exclusion of a cell from its own candidates when
// a rule connects a type to itself.
func TestConnectSelf(t *testing.T) {
	t.Parallel()
	cfg, dir, all := placeSmall(t)
	ix, err := BuildIndex(cfg, "p", dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, ch := range cfg.Chunks() {
		n, err := Connect(cfg, cfg.Rules[0], ch, ix, dir)
		if err != nil {
			t.Fatal(err)
		}
		pairs, err := readConnections(cfg, "p_to_p", ch, dir)
		if err != nil || len(pairs) != n {
			t.Fatalf("ReadConnections: %d pairs, %v; Connect said %d", len(pairs), err, n)
		}
		for _, pr := range pairs {
			if pr[0] == pr[1] {
				t.Fatalf("cell %d connected to itself", pr[0])
			}
		}
		total += n
	}
	// No limit and no probability: every pair within the distance, except
	// self. Checked on a sample of targets.
	perTarget := make([]int, len(all))
	for _, ch := range cfg.Chunks() {
		pairs, _ := readConnections(cfg, "p_to_p", ch, dir)
		for _, pr := range pairs {
			perTarget[pr[1]]++
		}
	}
	for id := 0; id < len(all); id += 7 {
		if want := len(within(all, all[id], 12)) - 1; perTarget[id] != want {
			t.Errorf("cell %d has %d sources, brute force %d", id, perTarget[id], want)
		}
	}
	if total < len(all) {
		t.Errorf("%d connections for %d cells", total, len(all))
	}
}
