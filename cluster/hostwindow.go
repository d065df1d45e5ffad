package cluster

import (
	"encoding/binary"
	"errors"
	"slices"
	"sync"
)

// The windows of a host's workers. The pool publishes each worker's set
// as a record of the host's down stream (recWin), in order with the
// worker's jobs: the set that a round publishes goes before the jobs
// that the round sends, in the same message. The agent puts it in its
// worker's window in shared memory, at the pool's generation, and the
// worker reads it with atomic loads as on the pool's host. A change of the
// pool's sets costs the pool no wait and one message per host, whatever
// the number of its workers. A worker still waits for its job's
// generation (up to a second, then it keeps every item): a set never
// reaches a worker after its job, but a window written late costs memory,
// never a wrong eviction.

// A part is one worker's set, sorted, at a generation.
type part struct {
	gen  uint64
	over bool
	keys []uint64
}

// encodePart encodes p: the generation (uvarint), the overflow flag (a
// byte), the number of keys (uvarint) and the keys, 8 bytes each,
// little-endian.
func encodePart(p part) []byte {
	b := make([]byte, 0, 2*binary.MaxVarintLen64+1+8*len(p.keys))
	b = binary.AppendUvarint(b, p.gen)
	if p.over {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(p.keys)))
	for _, k := range p.keys {
		b = binary.LittleEndian.AppendUint64(b, k)
	}
	return b
}

var errPart = errors.New("cluster: a window record that does not decode")

// decodePart decodes a record of encodePart.
func decodePart(b []byte) (part, error) {
	gen, w := binary.Uvarint(b)
	if w <= 0 || len(b) < w+1 || b[w] > 1 {
		return part{}, errPart
	}
	over := b[w] == 1
	b = b[w+1:]
	count, w := binary.Uvarint(b)
	if w <= 0 || uint64(len(b)-w) != 8*count {
		return part{}, errPart
	}
	b = b[w:]
	keys := make([]uint64, count)
	for i := range keys {
		keys[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return part{gen: gen, over: over, keys: keys}, nil
}

// published is what a publisher of a window published last, for its
// figures and to tell a publish that changes nothing. Its methods take mu.
type published struct {
	mu   sync.Mutex
	gen  uint64
	n    uint64   // publishes that changed the set
	keys []uint64 // sorted
	over bool
}

// sortedSet returns keys sorted, without duplicates (keys is not
// modified), and whether they are more than capacity.
func sortedSet(keys []uint64, capacity int) ([]uint64, bool) {
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	return sorted, len(sorted) > capacity
}

// same reports whether sorted, over is the set published last. p.mu is
// held.
func (p *published) same(sorted []uint64, over bool) bool {
	return p.n > 0 && over == p.over && (over || slices.Equal(sorted, p.keys))
}

func (p *published) Gen() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gen
}

func (p *published) Publishes() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// workerWindow is the pool's side of the window of one of a host's
// workers (enginehost.WindowPublisher).
type workerWindow struct {
	host     *remoteHost
	slot     uint64
	capacity int
	published
}

// Publish records the set with the next generation and puts it in the
// host's stream; it does not wait for the network. Generations are even,
// as in shared memory.
func (w *workerWindow) Publish(keys []uint64) bool {
	sorted, over := sortedSet(keys, w.capacity)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.same(sorted, over) {
		return over
	}
	w.gen += 2
	w.n++
	w.keys, w.over = sorted, over
	p := part{gen: w.gen, over: over}
	if !over {
		p.keys = sorted
	}
	w.host.down.put(recWin, w.slot, encodePart(p))
	return over
}

func (w *workerWindow) Close() {}
