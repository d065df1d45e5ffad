package scaffold

import (
	"encoding/binary"
	"math/rand/v2"

	"github.com/cespare/xxhash/v2"
)

// Random numbers come from two deterministic generators, neither of which
// depends on the process, the worker or the order of jobs:
//
//   - Placement draws from a stream: math/rand/v2's PCG seeded with xxhash64
//     of (Seed, cell type, chunk). PCG's output for a seed is fixed by its
//     algorithm, and the floats are derived here, so that the files do not
//     depend on how a Go release implements rand.Rand's methods.
//   - Connectivity uses a counter-based generator: the random number of the
//     pair (source id, target id) of a rule is a bijective mix of the pair
//     keyed by xxhash64 of (Seed, rule). It needs no state carried from one
//     target to the next, so it does not depend on the order in which the
//     index reports candidates, and two pairs never draw the same number.

// seedOf derives a 64-bit seed from (seed, kind, name, extra...).
func seedOf(seed uint64, kind, name string, extra ...uint64) uint64 {
	b := binary.LittleEndian.AppendUint64(nil, seed)
	b = append(b, kind...)
	b = append(b, 0)
	b = append(b, name...)
	b = append(b, 0)
	for _, x := range extra {
		b = binary.LittleEndian.AppendUint64(b, x)
	}
	return xxhash.Sum64(b)
}

// stream is the random stream of one placement job.
type stream struct {
	pcg rand.PCG
}

// newStream seeds the stream of (seed, kind, name, chunk); the two PCG seeds
// derive from that tuple followed by 0 and by 1.
func newStream(seed uint64, kind, name string, chunk int) *stream {
	s := &stream{}
	s.pcg.Seed(seedOf(seed, kind, name, uint64(chunk), 0), seedOf(seed, kind, name, uint64(chunk), 1))
	return s
}

// float64 returns a uniform number in [0, 1) with 53 random bits.
func (s *stream) float64() float64 {
	return float64(s.pcg.Uint64()>>11) * 0x1p-53
}

// mix is the finalizer of SplitMix64: a bijection of uint64 with good
// avalanche.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// pairKey is the random number of the pair (source, target) under a rule
// whose seed is key. Distinct pairs get distinct numbers.
func pairKey(key uint64, source, target uint32) uint64 {
	return mix(key ^ mix(uint64(target)<<32|uint64(source)))
}
