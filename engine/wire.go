package engine

// The wire codec of the pipe transport: the frames that carry the typed
// messages of transport.go between the parent and a worker. PROTOCOL.md
// describes them for people.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/poolrun/poolrun/cachepool"
)

const (
	protoMagic   = "POOLRUN\x00"
	protoVersion = 8

	// maxFrame bounds one frame's payload, so that a corrupt length cannot
	// make a reader allocate without limit.
	maxFrame = 1 << 30
	// growStep is how much of a large frame a reader allocates ahead of the
	// bytes it has read.
	growStep = 1 << 20
)

// Frame kinds. Parent to worker: hello, job, stop, cancel, revoke. Worker
// to parent: hello, done, state, bye, alive.
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
	e.end(at)
}

// state encodes what an idle worker reports after it evicted.
func (e *enc) state(s *workerState) {
	at := e.begin(frameState)
	e.uint(uint64(s.evicted))
	e.stats(s.stats)
	e.resident(true, s.resident)
	e.end(at)
}

func (e *enc) bye(b *byeInfo) {
	at := e.begin(frameBye)
	e.stats(b.stats)
	e.int(b.peakRSS)
	e.end(at)
}

// dec reads the fields of one frame's payload.
type dec struct {
	b   []byte
	err error
}

func (d *dec) uint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) int() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) byte() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

// bytes returns a copy: frames are read into a reused buffer.
func (d *dec) bytes() []byte {
	n := d.uint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	if n == 0 {
		return nil
	}
	v := make([]byte, n)
	copy(v, d.b[:n])
	d.b = d.b[n:]
	return v
}

func (d *dec) string() string {
	n := d.uint()
	if n > uint64(len(d.b)) {
		d.fail()
		return ""
	}
	v := string(d.b[:n])
	d.b = d.b[n:]
	return v
}

func (d *dec) raw(n int) []byte {
	if n > len(d.b) {
		d.fail()
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) fail() {
	if d.err == nil {
		d.err = errShortFrame
	}
	d.b = nil
}

func (d *dec) stats() cachepool.Stats {
	return cachepool.Stats{
		Hits:      d.uint(),
		Builds:    d.uint(),
		Evictions: d.uint(),
		Resident:  int(d.uint()),
		Bytes:     d.int(),
		PeakBytes: d.int(),
		BuildTime: time.Duration(d.int()),
	}
}

// hello checks a hello frame's payload and returns the number and the
// parameters it carries.
func (d *dec) hello() (uint64, workerParams, error) {
	var wp workerParams
	if m := d.raw(len(protoMagic)); string(m) != protoMagic {
		return 0, wp, fmt.Errorf("engine: protocol: bad handshake magic %q", m)
	}
	if v := d.uint(); v != protoVersion {
		return 0, wp, fmt.Errorf("engine: protocol: version %d, this binary speaks %d", v, protoVersion)
	}
	n, pol := d.uint(), d.uint()
	wp.budget, wp.idle, wp.maxValue = d.int(), d.bool(), d.int()
	wp.heartbeat = time.Duration(d.int())
	if d.err != nil {
		return 0, wp, d.err
	}
	if wp.heartbeat < 0 {
		return 0, wp, fmt.Errorf("engine: protocol: negative heartbeat %v", wp.heartbeat)
	}
	if pol >= numPolicies {
		return 0, wp, fmt.Errorf("engine: protocol: unknown eviction policy %d", pol)
	}
	wp.policy = EvictPolicy(pol)
	return n, wp, nil
}

// hello reads the first frame of a stream, which must be a handshake, and
// returns the number (worker index or pid) and parameters it carries.
func (fr *frameReader) hello() (uint64, workerParams, error) {
	kind, d, err := fr.next()
	if err != nil {
		return 0, workerParams{}, fmt.Errorf("engine: protocol: reading the handshake: %w", err)
	}
	if kind != frameHello {
		return 0, workerParams{}, fmt.Errorf("engine: protocol: first frame is of kind %d, want a handshake", kind)
	}
	return d.hello()
}

func (d *dec) bool() bool { return d.byte() != 0 }

// keys decodes a list of keys; each takes 8 bytes, which bounds the count
// by the frame's size before anything is allocated.
func (d *dec) keys() []uint64 {
	n := d.uint()
	if n > uint64(len(d.b)/8) {
		d.fail()
		return nil
	}
	if n == 0 {
		return nil
	}
	ks := make([]uint64, n)
	for i := range ks {
		ks[i] = binary.LittleEndian.Uint64(d.b[8*i:])
	}
	d.b = d.b[8*n:]
	return ks
}

// resident decodes a resident set: sent false means unchanged since the
// last report.
func (d *dec) resident() (bool, []residentItem) {
	if !d.bool() {
		return false, nil
	}
	n := d.uint()
	if n > uint64(len(d.b)/9) { // 8 bytes of key and at least 1 of size
		d.fail()
		return false, nil
	}
	rs := make([]residentItem, 0, n)
	for range n {
		if len(d.b) < 8 {
			d.fail()
			return false, nil
		}
		k := binary.LittleEndian.Uint64(d.b)
		d.b = d.b[8:]
		rs = append(rs, residentItem{key: k, bytes: d.int()})
	}
	return d.err == nil, rs
}

func (d *dec) task() (*task, error) {
	t := &task{id: d.uint(), gen: d.uint(), fn: d.string(), arg: d.bytes()}
	t.keys = d.keys()
	t.order = d.keys()
	t.timeout = time.Duration(d.int())
	if t.timeout < 0 {
		d.fail()
	}
	return t, d.err
}

func (d *dec) cancel() (uint64, error) {
	id := d.uint()
	return id, d.err
}

func (d *dec) revoke() (id, seq uint64, err error) {
	id = d.uint()
	seq = d.uint()
	return id, seq, d.err
}

func (d *dec) state() (*workerState, error) {
	s := &workerState{evicted: int(d.uint()), stats: d.stats()}
	_, s.resident = d.resident()
	return s, d.err
}

func (d *dec) bye() (*byeInfo, error) {
	b := &byeInfo{stats: d.stats(), peakRSS: d.int()}
	return b, d.err
}

func (d *dec) done() (*reply, error) {
	r := &reply{id: d.uint(), outcome: d.byte()}
	r.start = time.Unix(0, d.int())
	r.elapsed = time.Duration(d.int())
	r.payload = d.bytes()
	r.stack = d.bytes()
	r.evicted = int(d.uint())
	r.budgetEvicted = int(d.uint())
	r.overBudget = d.bool()
	r.held = d.int()
	r.stats = d.stats()
	r.residentSent, r.resident = d.resident()
	return r, d.err
}

// frameReader reads frames from a stream.
type frameReader struct {
	r   *bufio.Reader
	buf []byte
}

func newFrameReader(r io.Reader) *frameReader {
	size := 64 << 10 // few system calls on an OS pipe
	if _, ok := r.(*memPipeReader); ok {
		// A read from memory costs a copy: a small buffer does as well,
		// and an in-process worker has three such readers, each of
		// which would otherwise hold the OS pipe's size.
		size = 4 << 10
	}
	return &frameReader{r: bufio.NewReaderSize(r, size)}
}

// next returns the next frame's kind and payload; the payload is valid until
// the following call. It returns io.EOF at a clean end of stream.
func (fr *frameReader) next() (byte, *dec, error) {
	var h [5]byte
	if _, err := io.ReadFull(fr.r, h[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			err = errShortFrame
		}
		return 0, nil, err
	}
	n := binary.LittleEndian.Uint32(h[:4])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("engine: protocol: frame of %d bytes exceeds the limit", n)
	}
	if int(n) <= cap(fr.buf) || n <= growStep {
		if cap(fr.buf) < int(n) {
			fr.buf = make([]byte, n)
		}
		fr.buf = fr.buf[:n]
		if _, err := io.ReadFull(fr.r, fr.buf); err != nil {
			return 0, nil, errShortFrame
		}
		return h[4], &dec{b: fr.buf}, nil
	}
	// A large frame: grow the buffer as its bytes arrive, so that a corrupt
	// length on a short stream cannot make the reader allocate a gigabyte.
	buf := fr.buf[:0]
	for len(buf) < int(n) {
		step := min(int(n)-len(buf), growStep)
		buf = slices.Grow(buf, step)
		m, err := io.ReadFull(fr.r, buf[len(buf):len(buf)+step])
		buf = buf[:len(buf)+m]
		if err != nil {
			fr.buf = buf
			return 0, nil, errShortFrame
		}
	}
	fr.buf = buf
	return h[4], &dec{b: fr.buf}, nil
}

// buffered reports whether a whole frame is already buffered, so that
// reading it will not block.
func (fr *frameReader) buffered() bool {
	n := fr.r.Buffered()
	if n < 5 {
		return false
	}
	h, _ := fr.r.Peek(5)
	return n >= 5+int(binary.LittleEndian.Uint32(h[:4]))
}
