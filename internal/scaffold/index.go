package scaffold

import (
	"fmt"
	"math"
	"unsafe"
)

// Index is a uniform grid over every cell of one type, for finding the cells
// within a distance of a point. It is built by [BuildIndex] from the placement
// files and is read-only afterwards: any number of goroutines may query it.
//
// Its memory is 16 bytes per cell (position and global id) plus 4 bytes per
// grid cell; [Index.Bytes] reports it.
type Index struct {
	cellType string
	hash     uint64 // Config.Hash of the configuration it was built for
	size     float64
	inv      float64 // 1/size
	n        [3]int  // grid cells along x, y, z
	start    []uint32
	pos      [][3]float32 // sorted by grid cell, then by id
	ids      []uint32     // global id of pos[i]
}

// maxGridCells bounds the grid of an index to this many cells per indexed
// cell (and at least minGridCells), whatever cell size is asked for.
const (
	maxGridCells = 4
	minGridCells = 1 << 12
)

// BuildIndex reads every placement file of cellType under outDir, checking
// that cfg wrote them, and builds an [Index] over all its cells. cellSize is
// the edge of a grid cell in µm; zero or less means the smallest
// MaxDistance of the rules from cellType (the largest chunk extent if no
// rule starts there). If the grid would have more than 4 cells
// per indexed cell (and more than 4096), its cells are made larger.
//
// It must run after every placement job of cellType has finished.
func BuildIndex(cfg *Config, cellType string, outDir string, cellSize float64) (*Index, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("scaffold: index %s: invalid configuration: %w", cellType, err)
	}
	counts, err := cfg.counts(cellType)
	if err != nil {
		return nil, err
	}
	total := 0
	for _, n := range counts {
		total += n
	}
	if !(cellSize > 0) {
		cellSize = cfg.indexCellSize(cellType)
	}
	ix := &Index{cellType: cellType, hash: cfg.Hash()}
	ix.setGrid(cfg.Box.Size, cellSize, max(minGridCells, maxGridCells*total))

	// Read every file in chunk order, so that positions are in global id order.
	raw := make([][3]float32, total)
	off := 0
	for i, ch := range cfg.Chunks() {
		if err := readPositionsFile(placementPath(outDir, cellType, ch), ix.hash, raw[off:off+counts[i]]); err != nil {
			return nil, fmt.Errorf("scaffold: index %s: %w", cellType, err)
		}
		off += counts[i]
	}

	// Counting sort by grid cell; stable, so ids ascend within a grid cell.
	cells := make([]uint32, total)
	ix.start = make([]uint32, ix.n[0]*ix.n[1]*ix.n[2]+1)
	for i, p := range raw {
		c := ix.cellOf(p)
		cells[i] = c
		ix.start[c+1]++
	}
	for c := 1; c < len(ix.start); c++ {
		ix.start[c] += ix.start[c-1]
	}
	ix.pos = make([][3]float32, total)
	ix.ids = make([]uint32, total)
	next := make([]uint32, len(ix.start)-1)
	copy(next, ix.start)
	for i, p := range raw {
		k := next[cells[i]]
		next[cells[i]]++
		ix.pos[k] = p
		ix.ids[k] = uint32(i)
	}
	return ix, nil
}

// setGrid sizes the grid over box with cells of edge size, enlarging them
// until there are at most limit.
func (ix *Index) setGrid(box [3]float64, size float64, limit int) {
	for {
		cells := 1.0
		for d := range 3 {
			ix.n[d] = max(1, int(math.Ceil(box[d]/size)))
			cells *= float64(ix.n[d])
		}
		if cells <= float64(limit) {
			break
		}
		size *= max(1.01, math.Cbrt(cells/float64(limit)))
	}
	ix.size = size
	ix.inv = 1 / size
}

func (ix *Index) coord(v float64, d int) int {
	f := math.Floor(v * ix.inv)
	switch {
	case f >= float64(ix.n[d]-1):
		return ix.n[d] - 1
	case !(f > 0): // also NaN
		return 0
	}
	return int(f)
}

func (ix *Index) cellOf(p [3]float32) uint32 {
	x := ix.coord(float64(p[0]), 0)
	y := ix.coord(float64(p[1]), 1)
	z := ix.coord(float64(p[2]), 2)
	return uint32((z*ix.n[1]+y)*ix.n[0] + x)
}

// Bytes returns the memory the index holds, in bytes.
func (ix *Index) Bytes() int64 {
	return int64(unsafe.Sizeof(*ix)) + int64(len(ix.cellType)) +
		int64(cap(ix.start))*4 + int64(cap(ix.pos))*12 + int64(cap(ix.ids))*4
}

// within calls fn(id, q) for every cell at position q within distance r of p,
// with id its global id, until fn returns false. A cell is within r when
// float32(dx*dx) + float32(dy*dy) + float32(dz*dz) <= r*r, computed in float32
// with dx = q[0]-p[0] and so on. The order of the calls is fixed for a given
// index but otherwise unspecified.
func (ix *Index) within(p [3]float32, r float32, fn func(id uint32, q [3]float32) bool) {
	if !(r >= 0) {
		return
	}
	r2 := r * r
	var lo, hi [3]int
	for d := range 3 {
		// A margin of a few float32 ulps keeps every cell that the float32
		// distance test could accept.
		v, rr := float64(p[d]), float64(r)
		m := (math.Abs(v) + rr) * 1e-6
		lo[d] = ix.coord(v-rr-m, d)
		hi[d] = ix.coord(v+rr+m, d)
	}
	nx, ny := ix.n[0], ix.n[1]
	for z := lo[2]; z <= hi[2]; z++ {
		for y := lo[1]; y <= hi[1]; y++ {
			row := (z*ny + y) * nx
			// Grid cells lo[0]..hi[0] of a row are one contiguous run.
			a, b := ix.start[row+lo[0]], ix.start[row+hi[0]+1]
			for k := a; k < b; k++ {
				q := ix.pos[k]
				dx, dy, dz := q[0]-p[0], q[1]-p[1], q[2]-p[2]
				if float32(dx*dx)+float32(dy*dy)+float32(dz*dz) <= r2 {
					if !fn(ix.ids[k], q) {
						return
					}
				}
			}
		}
	}
}
