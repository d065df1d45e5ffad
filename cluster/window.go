package cluster

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/shm"
)

var (
	_ engine.WindowPublisher = (*kvPublisher)(nil)
	_ engine.WindowReader    = (*kvReader)(nil)
)

// The window of a remote worker: one entry of the pool's JetStream
// key-value bucket, holding the required set (sorted keys) and the
// overflow flag. The generation is twice the entry's revision (a window's
// generations are even when stable, as in shared memory), so that a job
// stamped with generation g runs only once its worker has seen revision
// g/2 or later.

// encodeSet encodes a published set: a byte (1: overflow), then the keys,
// 8 bytes each, little-endian.
func encodeSet(keys []uint64, over bool) []byte {
	b := make([]byte, 1, 1+8*len(keys))
	if over {
		b[0] = 1
	} else {
		for _, k := range keys {
			b = binary.LittleEndian.AppendUint64(b, k)
		}
	}
	return b
}

func decodeSet(b []byte) (keys []uint64, over bool, err error) {
	if len(b) == 0 || b[0] > 1 || (len(b)-1)%8 != 0 {
		return nil, false, fmt.Errorf("cluster: a window entry of %d bytes: not a set", len(b))
	}
	keys = make([]uint64, 0, (len(b)-1)/8)
	for i := 1; i < len(b); i += 8 {
		keys = append(keys, binary.LittleEndian.Uint64(b[i:]))
	}
	return keys, b[0] == 1, nil
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

// kvPublisher publishes one worker's window (engine.WindowPublisher).
type kvPublisher struct {
	kv       nats.KeyValue
	key      string
	capacity int
	published
	failed bool // a publish failed: the generation moved on without it
}

func newKVPublisher(kv nats.KeyValue, key string, capacity int) *kvPublisher {
	return &kvPublisher{kv: kv, key: key, capacity: capacity}
}

// Publish puts the set in the entry. A publish that fails still moves the
// generation on: the worker, which cannot see that generation, then keeps
// every item rather than evict by an old set.
func (p *kvPublisher) Publish(keys []uint64) bool {
	sorted, over := sortedSet(keys, p.capacity)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.failed && p.same(sorted, over) {
		return over
	}
	rev, err := p.kv.Put(p.key, encodeSet(sorted, over))
	p.n++
	if err != nil {
		p.failed = true
		p.gen += 2
		return over
	}
	p.failed = false
	p.gen = max(p.gen+2, 2*rev)
	p.keys, p.over = sorted, over
	return over
}

// Close deletes the entry.
func (p *kvPublisher) Close() { p.kv.Delete(p.key) }

// kvReader is a worker's view of its window entry (engine.WindowReader),
// kept by a watch of the entry, with a direct get when the watch is late.
type kvReader struct {
	kv  nats.KeyValue
	key string
	w   nats.KeyWatcher

	mu      sync.Mutex
	gen     uint64
	keys    []uint64
	over    bool
	changed chan struct{} // closed and replaced at every change
	err     error         // the last entry that could not be decoded
}

func newKVReader(kv nats.KeyValue, key string) (*kvReader, error) {
	w, err := kv.Watch(key)
	if err != nil {
		return nil, fmt.Errorf("cluster: watching the window: %w", err)
	}
	r := &kvReader{kv: kv, key: key, w: w, changed: make(chan struct{})}
	go r.follow()
	return r, nil
}

// lateBy, when not zero, makes a worker's window reach it late: the
// watch takes every entry at least lateBy after it arrived (one after the
// other), and the entry of a direct get lateBy after the get. Only tests
// set it (window_internal_test.go, in a worker process of the test
// binary), to check that a late window never makes a worker evict an item
// that a job it runs still needs.
var lateBy time.Duration

func (r *kvReader) follow() {
	for e := range r.w.Updates() {
		if e == nil {
			continue // the end of the initial values
		}
		if lateBy > 0 {
			time.Sleep(lateBy)
		}
		r.take(e)
	}
}

// take records entry e if it is newer than what the reader holds.
func (r *kvReader) take(e nats.KeyValueEntry) {
	if e.Operation() != nats.KeyValuePut {
		return
	}
	keys, over, err := decodeSet(e.Value())
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.err = err
		return
	}
	if g := 2 * e.Revision(); g > r.gen {
		r.gen, r.keys, r.over = g, keys, over
		close(r.changed)
		r.changed = make(chan struct{})
	}
}

func (r *kvReader) Gen() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gen
}

// Snapshot copies the set the reader holds. Before it has seen any set
// (generation 0: the pool has not published this worker's window yet, or
// the entry has not arrived), the snapshot is overflowed: the worker keeps
// every item, since it cannot tell which are still needed.
func (r *kvReader) Snapshot(dst []uint64) (shm.Snapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gen == 0 && r.err != nil {
		return shm.Snapshot{}, r.err
	}
	return shm.Snapshot{Gen: r.gen, Keys: append(dst[:0], r.keys...), Overflow: r.over || r.gen == 0}, nil
}

// WaitGen waits for the watch to bring generation gen; when it has not by
// half the time left, it gets the entry directly once.
func (r *kvReader) WaitGen(gen uint64, deadline time.Time) bool {
	direct := time.Now().Add(time.Until(deadline) / 2)
	asked := false
	for {
		r.mu.Lock()
		g, ch := r.gen, r.changed
		r.mu.Unlock()
		if g >= gen {
			return true
		}
		now := time.Now()
		if !now.Before(deadline) {
			return false
		}
		if !asked && !now.Before(direct) {
			asked = true
			if e, err := r.kv.Get(r.key); err == nil && lateBy > 0 {
				time.AfterFunc(lateBy, func() { r.take(e) })
			} else if err == nil {
				r.take(e)
				continue
			}
		}
		wake := deadline
		if !asked {
			wake = direct
		}
		t := time.NewTimer(time.Until(wake))
		select {
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
}

func (r *kvReader) WaitChange(after uint64, deadline time.Time) uint64 {
	for {
		r.mu.Lock()
		g, ch := r.gen, r.changed
		r.mu.Unlock()
		if g != after || !time.Now().Before(deadline) {
			return g
		}
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
}

// Close stops the watch.
func (r *kvReader) Close() error { return r.w.Stop() }
