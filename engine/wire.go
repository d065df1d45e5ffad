package engine

// The wire codec of the pipe transport: the frames that carry the typed
// messages of transport.go between the parent and a worker. PROTOCOL.md
// describes them for people.

import (
	"encoding/binary"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/internal/enginehost"
)

const (
	protoMagic   = "POOLRUN\x00"
	protoVersion = enginehost.ProtocolVersion

	// maxFrame bounds one frame's payload, so that a corrupt length cannot
	// make a reader allocate without limit.
	maxFrame = 1 << 30
	// growStep is how much of a large frame a reader allocates ahead of the
	// bytes it has read, at least (it doubles its buffer as they come).
	growStep = 1 << 20
	// keepBuffer is the largest buffer a frame reader keeps for the next
	// frame: a larger one, of a large value, goes once it is decoded.
	keepBuffer = 4 << 20
)

// Frame kinds. Parent to worker: hello, job, stop, cancel, revoke. Worker
// to parent: hello, started, done, state, bye, alive.
const (
	frameHello byte = 1 + iota
	frameJob
	frameStop
	frameDone
	frameBye
	frameState
	frameCancel
	frameAlive
	frameRevoke
	frameStarted
)

// enc appends the fields of a frame to a buffer.
type enc struct{ b []byte }

func (e *enc) begin(kind byte) int {
	at := len(e.b)
	e.b = append(e.b, 0, 0, 0, 0, kind)
	return at
}

func (e *enc) end(at int) {
	binary.LittleEndian.PutUint32(e.b[at:], uint32(len(e.b)-at-5))
}

func (e *enc) uint(v uint64)   { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) int(v int64)     { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) bytes(v []byte)  { e.uint(uint64(len(v))); e.b = append(e.b, v...) }
func (e *enc) string(v string) { e.uint(uint64(len(v))); e.b = append(e.b, v...) }

func (e *enc) stats(s cachepool.Stats) {
	e.uint(s.Hits)
	e.uint(s.Builds)
	e.uint(s.Evictions)
	e.uint(uint64(s.Resident))
	e.int(s.Bytes)
	e.int(s.PeakBytes)
	e.int(int64(s.BuildTime))
}

// hello encodes a handshake: the parent sends the worker's index and the
// pool's parameters for workers; the worker answers with its pid and the
// parameters it applies.
func (e *enc) hello(index int, wp workerParams) {
	at := e.begin(frameHello)
	e.b = append(e.b, protoMagic...)
	e.uint(protoVersion)
	e.uint(uint64(index))
	e.uint(uint64(wp.policy))
	e.int(wp.budget)
	e.bool(wp.idle)
	e.int(wp.maxValue)
	e.int(int64(wp.heartbeat))
	e.uint(uint64(wp.items))
	e.end(at)
}

func (e *enc) bool(v bool) {
	b := byte(0)
	if v {
		b = 1
	}
	e.b = append(e.b, b)
}

func (e *enc) keys(ks []uint64) {
	e.uint(uint64(len(ks)))
	for _, k := range ks {
		e.b = binary.LittleEndian.AppendUint64(e.b, k)
	}
}

func (e *enc) resident(sent bool, rs []residentItem) {
	e.bool(sent)
	if !sent {
		return
	}
	e.uint(uint64(len(rs)))
	for _, r := range rs {
		e.b = binary.LittleEndian.AppendUint64(e.b, r.key)
		e.int(r.bytes)
	}
}

func (e *enc) task(t *task) {
	at := e.begin(frameJob)
	e.uint(t.id)
	e.uint(t.gen)
	e.string(t.fn)
	e.bytes(t.arg)
	e.keys(t.keys)
	e.keys(t.order)
	e.int(int64(t.timeout))
	e.uint(uint64(t.attempt))
	e.end(at)
}

func (e *enc) stop() { e.end(e.begin(frameStop)) }

// cancel asks a worker to cancel job id: its context if it runs, the job
// itself if it has not started.
func (e *enc) cancel(id uint64) {
	at := e.begin(frameCancel)
	e.uint(id)
	e.end(at)
}

// revoke asks a worker to hand job id, the seq-th job frame sent to it
// (from 1), back if it has not read that frame yet.
func (e *enc) revoke(id, seq uint64) {
	at := e.begin(frameRevoke)
	e.uint(id)
	e.uint(seq)
	e.end(at)
}

// started tells the parent that job id began ago.
func (e *enc) started(id uint64, ago time.Duration) {
	at := e.begin(frameStarted)
	e.uint(id)
	e.uint(uint64(max(ago, 0)))
	e.end(at)
}

// alive tells the parent that a busy worker lives.
func (e *enc) alive() { e.end(e.begin(frameAlive)) }

func (e *enc) done(r *reply) {
	at := e.begin(frameDone)
	e.uint(r.id)
	e.b = append(e.b, r.outcome)
	e.int(r.start.UnixNano())
	e.int(int64(r.elapsed))
	e.bytes(r.payload)
	e.bytes(r.stack)
	e.uint(uint64(r.evicted))
	e.uint(uint64(r.budgetEvicted))
	e.bool(r.overBudget)
	e.int(r.held)
	e.stats(r.stats)
	e.resident(r.residentSent, r.resident)
	e.items(r.items)
	e.uint(uint64(len(r.undeclared)))
	for _, u := range r.undeclared {
		e.b = binary.LittleEndian.AppendUint64(e.b, u.Key)
		e.string(u.Name)
		e.string(u.Family)
	}
	e.end(at)
}

// state encodes what an idle worker reports after it evicted.
func (e *enc) state(s *workerState) {
	at := e.begin(frameState)
	e.uint(uint64(s.evicted))
	e.stats(s.stats)
	e.resident(true, s.resident)
	e.items(s.items)
	e.end(at)
}

func (e *enc) bye(b *byeInfo) {
	at := e.begin(frameBye)
	e.stats(b.stats)
	e.int(b.peakRSS)
	e.items(b.items)
	e.end(at)
}
