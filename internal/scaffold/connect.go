package scaffold

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// Connect connects the target cells of rule in ch to source cells found in
// src, the [Index] of rule.From built for cfg, writes the pairs to
// outDir/connectivity/<rule.Name>/<chunk>.bin and returns how many it wrote.
//
// It reads the placement file of rule.To for ch, so it must run after that
// placement job, and after every placement job of rule.From (which src was
// built from).
//
// For each target cell, the candidates are the source cells within
// rule.MaxDistance (the target itself excluded when From == To). Each
// candidate pair draws a random number u in [0, 1) from (Seed, rule.Name,
// source id, target id) alone; the pair is kept if u < rule.Probability, and
// of the kept pairs the rule.MaxPerTarget with the smallest u are chosen: each
// candidate is kept independently, and the chosen ones are a uniform random
// subset of the kept ones. The output therefore does not depend on the
// process, the worker, the order of jobs, nor on the grid of src.
//
// The file lists (source id, target id) pairs of global ids (see the
// package documentation), ordered by target, then source. It is written to a
// temporary name and renamed, as in [Place].
func Connect(cfg *Config, rule Rule, ch Chunk, src *Index, outDir string) (int, error) {
	if err := cfg.Validate(); err != nil {
		return 0, fmt.Errorf("scaffold: connect %s: invalid configuration: %w", rule.Name, err)
	}
	if r, err := cfg.Rule(rule.Name); err != nil {
		return 0, err
	} else if r != rule {
		return 0, fmt.Errorf("%w: %q differs from the configuration's: %+v, want %+v", errUnknownRule, rule.Name, rule, r)
	}
	if err := cfg.checkChunk(ch); err != nil {
		return 0, err
	}
	hash := cfg.Hash()
	switch {
	case src == nil:
		return 0, fmt.Errorf("%w: rule %s: nil index", errWrongIndex, rule.Name)
	case src.cellType != rule.From:
		return 0, fmt.Errorf("%w: rule %s connects from %s, the index is of %s", errWrongIndex, rule.Name, rule.From, src.cellType)
	case src.hash != hash:
		return 0, fmt.Errorf("%w: rule %s: index of %s built for configuration %016x, not this one (%016x)", errWrongIndex, rule.Name, src.cellType, src.hash, hash)
	}
	targets, err := readPositions(cfg, rule.To, ch, outDir)
	if err != nil {
		return 0, fmt.Errorf("scaffold: connect %s: %w", rule.Name, err)
	}
	first, err := cfg.firstID(rule.To, ch)
	if err != nil {
		return 0, err
	}

	ruleKey := seedOf(cfg.Seed, "connect", rule.Name)
	// A pair is kept if its number u = key / 2⁶⁴ < Probability, that is if
	// key>>11 < Probability·2⁵³, exact since Probability < 1.
	filter := rule.Probability > 0 && rule.Probability < 1
	below := uint64(math.Ldexp(rule.Probability, 53))
	self := rule.From == rule.To
	radius := float32(rule.MaxDistance)
	limit := rule.MaxPerTarget

	var (
		sel    selection
		target uint32
		ids    []uint32
		pairs  []byte
		total  int
	)
	collect := func(id uint32, _ [3]float32) bool {
		if self && id == target {
			return true
		}
		key := pairKey(ruleKey, id, target)
		if filter && key>>11 >= below {
			return true
		}
		sel.offer(key, id, limit)
		return true
	}
	for i, p := range targets {
		target = first + uint32(i)
		sel.reset()
		src.within(p, radius, collect)
		ids = sel.ids(ids[:0])
		slices.Sort(ids)
		for _, id := range ids {
			pairs = binary.LittleEndian.AppendUint32(pairs, id)
			pairs = binary.LittleEndian.AppendUint32(pairs, target)
		}
		total += len(ids)
	}
	b := append(newFile(connMagic, hash, total, connRecord), pairs...)
	if err := writeAtomic(connectivityPath(outDir, rule.Name, ch), b); err != nil {
		return 0, fmt.Errorf("scaffold: connect %s in chunk %s: %w", rule.Name, ch, err)
	}
	return total, nil
}

// selection keeps the candidates with the smallest keys: all of them when the
// limit is 0, otherwise a max-heap of at most limit.
type selection struct {
	heap []candidate
}

type candidate struct {
	key uint64
	id  uint32
}

func (s *selection) reset() { s.heap = s.heap[:0] }

func (s *selection) offer(key uint64, id uint32, limit int) {
	h := s.heap
	switch {
	case limit <= 0:
		s.heap = append(h, candidate{key, id})
	case len(h) < limit:
		// Sift up.
		h = append(h, candidate{key, id})
		for i := len(h) - 1; i > 0; {
			up := (i - 1) / 2
			if h[up].key >= h[i].key {
				break
			}
			h[up], h[i] = h[i], h[up]
			i = up
		}
		s.heap = h
	case key < h[0].key:
		// Replace the largest, then sift down.
		h[0] = candidate{key, id}
		for i := 0; ; {
			l, big := 2*i+1, i
			if l < len(h) && h[l].key > h[big].key {
				big = l
			}
			if r := l + 1; r < len(h) && h[r].key > h[big].key {
				big = r
			}
			if big == i {
				break
			}
			h[i], h[big] = h[big], h[i]
			i = big
		}
	}
}

// ids appends the ids of the selected candidates to dst, in no given order.
func (s *selection) ids(dst []uint32) []uint32 {
	for _, c := range s.heap {
		dst = append(dst, c.id)
	}
	return dst
}

// readConnections reads the connectivity file of rule and ch, checking that
// cfg wrote it, and returns its (source id, target id) pairs.
func readConnections(cfg *Config, rule string, ch Chunk, outDir string) ([][2]uint32, error) {
	if _, err := cfg.Rule(rule); err != nil {
		return nil, err
	}
	if err := cfg.checkChunk(ch); err != nil {
		return nil, err
	}
	path := connectivityPath(outDir, rule, ch)
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	recs, err := checkFile(path, b, connMagic, cfg.Hash(), -1, connRecord)
	if err != nil {
		return nil, err
	}
	out := make([][2]uint32, len(recs)/connRecord)
	for i := range out {
		out[i] = [2]uint32{
			binary.LittleEndian.Uint32(recs[i*connRecord:]),
			binary.LittleEndian.Uint32(recs[i*connRecord+4:]),
		}
	}
	return out, nil
}
