package engine

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/poolrun/poolrun/cachepool"
)

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
	if v := d.view(); v != nil {
		return append([]byte(nil), v...)
	}
	return nil
}

// view returns a bytes field in place, nil if empty: it is valid as long
// as the frame.
func (d *dec) view() []byte {
	n := d.uint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	if n == 0 {
		return nil
	}
	v := d.b[:n:n]
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
	items := d.uint()
	if d.err != nil {
		return 0, wp, d.err
	}
	if wp.heartbeat < 0 {
		return 0, wp, fmt.Errorf("engine: protocol: negative heartbeat %v", wp.heartbeat)
	}
	if pol >= numPolicies {
		return 0, wp, fmt.Errorf("engine: protocol: unknown eviction policy %d", pol)
	}
	if items > uint64(itemsStrict) {
		return 0, wp, fmt.Errorf("engine: protocol: unknown items mode %d", items)
	}
	wp.policy, wp.items = EvictPolicy(pol), itemsMode(items)
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

// appendKeys decodes a list of keys, appended to ks; each takes 8 bytes,
// which bounds the count by the frame's size before anything is
// allocated.
func (d *dec) appendKeys(ks []uint64) []uint64 {
	n := d.uint()
	if n > uint64(len(d.b)/8) {
		d.fail()
		return ks
	}
	ks = slices.Grow(ks, int(n))
	for i := range int(n) {
		ks = append(ks, binary.LittleEndian.Uint64(d.b[8*i:]))
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

// task decodes a job frame into t, which it reuses: its function's name
// where the frame names the same, the room of its keys; t's argument is
// the frame's own bytes, valid until the frame reader's next frame.
func (d *dec) task(t *task) error {
	t.id, t.gen = d.uint(), d.uint()
	if fn := d.view(); string(fn) != t.fn {
		t.fn = string(fn)
	}
	t.arg = d.view()
	t.keys = d.appendKeys(t.keys[:0])
	t.order = d.appendKeys(t.order[:0])
	t.timeout = time.Duration(d.int())
	attempt := d.uint()
	if t.timeout < 0 || attempt > math.MaxInt32 {
		d.fail()
	}
	t.attempt = int(attempt)
	t.cancelled = false
	return d.err
}

func (d *dec) cancel() (uint64, error) {
	id := d.uint()
	return id, d.err
}

func (d *dec) started() (uint64, time.Duration, error) {
	id := d.uint()
	ago := d.uint()
	if ago > math.MaxInt64 {
		d.fail()
	}
	return id, time.Duration(ago), d.err
}

func (d *dec) revoke() (id, seq uint64, err error) {
	id = d.uint()
	seq = d.uint()
	return id, seq, d.err
}

func (d *dec) state() (*workerState, error) {
	s := &workerState{evicted: int(d.uint()), stats: d.stats()}
	_, s.resident = d.resident()
	s.items = d.items()
	return s, d.err
}

func (d *dec) bye() (*byeInfo, error) {
	b := &byeInfo{stats: d.stats(), peakRSS: d.int()}
	b.items = d.items()
	return b, d.err
}

// done decodes a done frame into r.
func (d *dec) done(r *reply) error {
	*r = reply{id: d.uint(), outcome: d.byte()}
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
	r.items = d.items()
	n := d.uint()
	if n > uint64(len(d.b)/10) { // a key, and two lengths at least
		d.fail()
		n = 0
	}
	for range n {
		k := d.raw(8)
		if k == nil {
			break
		}
		u := cachepool.Undeclared{Key: binary.LittleEndian.Uint64(k)}
		u.Name, u.Family = d.string(), d.string()
		r.undeclared = append(r.undeclared, u)
	}
	return d.err
}

// frameReader reads frames from a stream.
type frameReader struct {
	r   *bufio.Reader
	buf []byte
	// h and d are the last frame's header and payload, in the reader so
	// that a frame costs no allocation.
	h [5]byte
	d dec
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10)} // few system calls on an OS pipe
}

// next returns the next frame's kind and payload; the payload (and the
// decoder) are valid until the following call. It returns io.EOF at a
// clean end of stream.
func (fr *frameReader) next() (byte, *dec, error) {
	h := fr.h[:]
	if _, err := io.ReadFull(fr.r, h); err != nil {
		if err == io.ErrUnexpectedEOF {
			err = errShortFrame
		}
		return 0, nil, err
	}
	n := binary.LittleEndian.Uint32(h[:4])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("engine: protocol: frame of %d bytes exceeds the limit", n)
	}
	if cap(fr.buf) > keepBuffer {
		fr.buf = nil // the last frame was a large one: let its memory go
	}
	if int(n) <= cap(fr.buf) || n <= growStep {
		if cap(fr.buf) < int(n) {
			fr.buf = make([]byte, n)
		}
		fr.buf = fr.buf[:n]
		if _, err := io.ReadFull(fr.r, fr.buf); err != nil {
			return 0, nil, errShortFrame
		}
		fr.d = dec{b: fr.buf}
		return h[4], &fr.d, nil
	}
	// A large frame: grow the buffer as its bytes arrive, so that a corrupt
	// length on a short stream cannot make the reader allocate a gigabyte.
	buf := fr.buf[:0]
	for len(buf) < int(n) {
		step := min(int(n)-len(buf), growStep)
		if cap(buf)-len(buf) < step {
			// Double: a frame of n bytes costs at most 2n of
			// allocations, where growing by steps cost several n.
			buf = slices.Grow(buf, min(int(n), max(2*cap(buf), len(buf)+step))-len(buf))
		}
		m, err := io.ReadFull(fr.r, buf[len(buf):len(buf)+step])
		buf = buf[:len(buf)+m]
		if err != nil {
			fr.buf = buf
			return 0, nil, errShortFrame
		}
	}
	fr.buf = buf
	fr.d = dec{b: fr.buf}
	return h[4], &fr.d, nil
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
