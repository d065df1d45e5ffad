package scaffold

import (
	"encoding/binary"
	"fmt"
	"math"
)

// expected returns the mean number of cells of t in one chunk.
func (c *Config) expected(t CellType) float64 {
	return t.Density * 1e-9 * c.Box.Chunk[0] * c.Box.Chunk[1] * c.Box.Chunk[2]
}

// drawCount takes the first draw of a placement stream: the mean rounded down
// or up at random, so that the count is exact on average.
func drawCount(mean float64, s *stream) int {
	n := math.Floor(mean)
	if s.float64() < mean-n {
		n++
	}
	return int(n)
}

// count returns the number of cells of cellType that [Place] puts in ch. It
// costs one random draw, not a placement.
func (c *Config) count(cellType string, ch Chunk) (int, error) {
	t, err := c.cellType(cellType)
	if err != nil {
		return 0, err
	}
	if err := c.checkChunk(ch); err != nil {
		return 0, err
	}
	return drawCount(c.expected(t), newStream(c.Seed, "place", t.Name, ch.Index)), nil
}

// counts returns the cell count of cellType in every chunk, in chunk order.
func (c *Config) counts(cellType string) ([]int, error) {
	t, err := c.cellType(cellType)
	if err != nil {
		return nil, err
	}
	chunks := c.Chunks()
	out := make([]int, len(chunks))
	mean := c.expected(t)
	for i, ch := range chunks {
		out[i] = drawCount(mean, newStream(c.Seed, "place", t.Name, ch.Index))
	}
	return out, nil
}

// cells returns the number of cells of cellType in the whole box.
func (c *Config) cells(cellType string) (int, error) {
	counts, err := c.counts(cellType)
	total := 0
	for _, n := range counts {
		total += n
	}
	return total, err
}

// firstID returns the global id of the first cell of cellType in ch.
//
// Global ids number the cells of one type from 0, chunk after chunk in the
// order of [Config.Chunks], and within a chunk in the order of its placement
// file: the cell at position i of the file of chunk ch has id firstID(ch) + i.
// They depend only on the configuration, not on which jobs ran first.
func (c *Config) firstID(cellType string, ch Chunk) (uint32, error) {
	if err := c.checkChunk(ch); err != nil {
		return 0, err
	}
	counts, err := c.counts(cellType)
	if err != nil {
		return 0, err
	}
	first := 0
	for _, n := range counts[:ch.Index] {
		first += n
	}
	return uint32(first), nil
}

// Place places the cells of cellType in ch and writes their positions to
// outDir/placement/<cellType>/<chunk>.bin, creating folders as needed, and
// returns how many it placed.
//
// The cells are uniform in the chunk, as many as the density gives (the
// mean rounded down or up at random), drawn from a random stream seeded by
// (Seed, cellType, ch) alone, so the file is the same whichever process
// writes it and in whichever order the jobs run. The file is
// written to a temporary name in the same folder and renamed, so that a
// reader never sees half of it; the temporary file is removed on error.
func Place(cfg *Config, cellType string, ch Chunk, outDir string) (int, error) {
	if err := cfg.Validate(); err != nil {
		return 0, fmt.Errorf("scaffold: place %s: invalid configuration: %w", cellType, err)
	}
	t, err := cfg.cellType(cellType)
	if err != nil {
		return 0, err
	}
	if err := cfg.checkChunk(ch); err != nil {
		return 0, err
	}
	s := newStream(cfg.Seed, "place", t.Name, ch.Index)
	n := drawCount(cfg.expected(t), s)
	lo, _ := cfg.chunkBounds(ch)
	size := cfg.Box.Chunk
	b := newFile(placeMagic, cfg.Hash(), n, placeRecord)
	for range n {
		for d := range 3 {
			// The conversion of the product stops a fused multiply-add, so
			// that every architecture rounds alike.
			v := float32(lo[d] + float64(s.float64()*size[d]))
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	path := placementPath(outDir, t.Name, ch)
	if err := writeAtomic(path, b); err != nil {
		return 0, fmt.Errorf("scaffold: place %s in chunk %s: %w", t.Name, ch, err)
	}
	return n, nil
}

// readPositions reads the placement file of cellType and ch, checking that the
// configuration wrote it, and returns the positions in file order.
func readPositions(cfg *Config, cellType string, ch Chunk, outDir string) ([][3]float32, error) {
	n, err := cfg.count(cellType, ch)
	if err != nil {
		return nil, err
	}
	out := make([][3]float32, n)
	if err := readPositionsFile(placementPath(outDir, cellType, ch), cfg.Hash(), out); err != nil {
		return nil, err
	}
	return out, nil
}

// readPositions reads a placement file of len(out) records into out.
func readPositionsFile(path string, hash uint64, out [][3]float32) error {
	b, err := readFile(path)
	if err != nil {
		return err
	}
	recs, err := checkFile(path, b, placeMagic, hash, len(out), placeRecord)
	if err != nil {
		return err
	}
	for i := range out {
		r := recs[i*placeRecord:]
		out[i] = [3]float32{
			math.Float32frombits(binary.LittleEndian.Uint32(r)),
			math.Float32frombits(binary.LittleEndian.Uint32(r[4:])),
			math.Float32frombits(binary.LittleEndian.Uint32(r[8:])),
		}
	}
	return nil
}
