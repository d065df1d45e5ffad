package cluster

import (
	"encoding/binary"
	"errors"
	"sync"

	"github.com/nats-io/nats.go"
)

// The windows of an agent's workers travel together: one message on the
// agent's subject poolrun.a.AGENT.win carries the sets that changed since
// the last one, each with its worker's id and generation, and the agent
// publishes each in its worker's window in shared memory at that
// generation. So a change of the pool's sets costs one message per host,
// sent without the scheduler waiting for it, rather than one key-value put
// per worker, each waited for. A worker waits for its job's generation as
// it would for a key-value entry (up to a second, then it keeps every
// item: a lost message costs memory, never a wrong eviction).

func agentSubject(agent, what string) string { return "poolrun.a." + agent + "." + what }

// hostWindows publishes the windows of one agent's workers.
type hostWindows struct {
	nc      *nats.Conn
	subject string

	mu      sync.Mutex
	pending map[string]part // by worker id
	sending bool            // a goroutine sends what is pending
}

// A part is one worker's set, sorted, at a generation.
type part struct {
	gen  uint64
	over bool
	keys []uint64
}

func newHostWindows(nc *nats.Conn, agent string) *hostWindows {
	return &hostWindows{nc: nc, subject: agentSubject(agent, "win"), pending: map[string]part{}}
}

// put records worker id's set and has it sent.
func (h *hostWindows) put(id string, p part) {
	h.mu.Lock()
	h.pending[id] = p
	start := !h.sending
	h.sending = true
	h.mu.Unlock()
	if start {
		go h.send()
	}
}

// send sends what is pending, one message at a time, until nothing is.
func (h *hostWindows) send() {
	for {
		h.mu.Lock()
		if len(h.pending) == 0 {
			h.sending = false
			h.mu.Unlock()
			return
		}
		msg := encodeParts(h.pending)
		clear(h.pending)
		h.mu.Unlock()
		h.nc.Publish(h.subject, msg)
	}
}

// encodeParts encodes parts: per part, the worker id (uvarint length,
// bytes), the generation (uvarint), the overflow flag (a byte), the
// number of keys (uvarint) and the keys, 8 bytes each, little-endian.
func encodeParts(parts map[string]part) []byte {
	var b []byte
	for id, p := range parts {
		b = binary.AppendUvarint(b, uint64(len(id)))
		b = append(b, id...)
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
	}
	return b
}

var errParts = errors.New("cluster: a host window message that does not decode")

// decodeParts calls f with each part of a message encoded by encodeParts.
func decodeParts(b []byte, f func(id string, p part)) error {
	for len(b) > 0 {
		n, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < n {
			return errParts
		}
		id := string(b[w : w+int(n)])
		b = b[w+int(n):]
		gen, w := binary.Uvarint(b)
		if w <= 0 || len(b) < w+1 {
			return errParts
		}
		over := b[w] == 1
		b = b[w+1:]
		count, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w)/8 < count {
			return errParts
		}
		b = b[w:]
		keys := make([]uint64, count)
		for i := range keys {
			keys[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
		b = b[8*count:]
		f(id, part{gen: gen, over: over, keys: keys})
	}
	return nil
}

// workerWindow is the pool's side of the window of one of an agent's
// workers (engine.WindowPublisher).
type workerWindow struct {
	host     *hostWindows
	id       string
	capacity int
	published
}

// Publish records the set with the next generation and has it sent with
// the other workers' changes of the host; it does not wait for the send.
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
	w.host.put(w.id, p)
	return over
}

func (w *workerWindow) Close() {}
