package cluster

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
)

// A host's two streams. Everything between the pool and one host agent
// travels on two byte streams (stream.go): poolrun.a.AGENT.down from the
// pool to the agent, poolrun.a.AGENT.up back. Each carries records; a
// record belongs to one of the agent's workers, by the slot number the
// agent gave it, or to the host (slot 0). What the pool writes to one
// host meanwhile (a dispatch round's jobs to its workers, their windows,
// cancels) goes in one message, and so does what the agent's workers
// reply meanwhile: the messages grow with hosts, not workers.
//
// A record is its kind (a byte), its slot (uvarint), the length of its
// payload (uvarint) and the payload.
const (
	recJobs  byte = 1 + iota // down: bytes of the worker's jobs stream
	recCtl                   // down: bytes of the worker's control stream
	recClose                 // down: the pool left the worker; payload: closeLeave, closeKill or closeRefused
	recWin                   // down: the worker's set (encodePart)
	recGone                  // down: the pool gave the host up; payload: why
	recOpen                  // up: a worker started; payload: its pid (uvarint)
	recReply                 // up: bytes of the worker's replies stream
	recEnd                   // up: the worker ended; payload: why, "" for a clean exit
	recPing                  // up: the agent lives; payload: when (uvarint ns after its start). Down: its echo
	recOut                   // up: whole lines the worker printed on its standard output (see outputWindow)
	recErr                   // up: the same of its standard error
	recGrant                 // down: the pool has passed on that many more bytes of the worker's output (uvarint)
)

// outputWindow is how many bytes of a worker's output (recOut and
// recErr together) its agent sends beyond what the pool has said it
// passed on (recGrant). So the pool holds at most that much of each
// remote worker's output, and a job that prints faster than the pool's
// writers take it waits in its write, as over a pipe to a terminal. The
// pool grants more each time it has passed on a quarter of the window,
// and whenever it has passed on all that came: an agent waits only while
// a grant is on its way.
const outputWindow = 1 << 20

// What a recClose says: the worker's jobs end, and it goes; or it is
// killed at once; or the pool, which no longer runs, did not admit it
// (the agent starts no other in its place).
const (
	closeLeave byte = iota
	closeKill
	closeRefused
)

// maxRecord bounds a record's payload: a frame of the largest value
// (engine.MaxValueSize, at most 1023 MiB) and some.
const maxRecord = 1<<30 + 1<<20

func hostSubject(agent, what string) string { return "poolrun.a." + agent + "." + what }

func appendRecord(b []byte, kind byte, slot uint64, payload []byte) []byte {
	return append(appendHeader(b, kind, slot, len(payload)), payload...)
}

// appendHeader appends the header of a record of n bytes of payload.
func appendHeader(b []byte, kind byte, slot uint64, n int) []byte {
	b = append(b, kind)
	b = binary.AppendUvarint(b, slot)
	return binary.AppendUvarint(b, uint64(n))
}

// recordReader reads the records of a host's stream.
type recordReader struct{ r *bufio.Reader }

func newRecordReader(r io.Reader) *recordReader {
	return &recordReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next record; its payload is the caller's.
func (rr *recordReader) next() (kind byte, slot uint64, payload []byte, err error) {
	kind, err = rr.r.ReadByte()
	if err != nil {
		return 0, 0, nil, err
	}
	if slot, err = binary.ReadUvarint(rr.r); err == nil {
		var n uint64
		if n, err = binary.ReadUvarint(rr.r); err == nil {
			if n > maxRecord {
				return 0, 0, nil, fmt.Errorf("cluster: a record of %d bytes, over the limit of %d", n, maxRecord)
			}
			payload = make([]byte, n)
			_, err = io.ReadFull(rr.r, payload)
		}
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // the stream ended within a record
	}
	return kind, slot, payload, err
}

// A sender writes the records of one side of a host's streams. Records
// put while a message is being sent wait and go together in the next:
// the scheduler's round (or the workers' replies) that comes meanwhile
// makes one message, not one per worker.
type sender struct {
	w *streamWriter

	mu      sync.Mutex
	cond    *sync.Cond // pending has records, or the sender closed
	room    *sync.Cond // pending has room (putData)
	pending []byte
	closed  bool
	err     error // the stream's, once a write failed

	writeMu sync.Mutex // orders the writes of the loop and of large records
}

// largeRecord is the payload size from which a record is written through
// rather than copied into the pending message.
const largeRecord = chunkSize

func newSender(w *streamWriter) *sender {
	s := &sender{w: w}
	s.cond = sync.NewCond(&s.mu)
	s.room = sync.NewCond(&s.mu)
	go s.loop()
	return s
}

// put queues a record; it never waits for the network, unless the
// payload is large (it is then written through, in order, without a copy).
func (s *sender) put(kind byte, slot uint64, payload []byte) error {
	return s.queue(kind, slot, payload, false)
}

// maxSenderPending is how many bytes of records putData lets wait.
const maxSenderPending = 4 << 20

// putData queues a record of a worker's stream, as put does, but waits
// while the records that wait are maxSenderPending or more: a worker that
// writes faster than the network carries waits, as over a pipe.
func (s *sender) putData(kind byte, slot uint64, payload []byte) error {
	return s.queue(kind, slot, payload, true)
}

func (s *sender) queue(kind byte, slot uint64, payload []byte, wait bool) error {
	if len(payload) >= largeRecord {
		return s.putLarge(kind, slot, payload)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for wait && len(s.pending) >= maxSenderPending && !s.closed {
		s.room.Wait()
	}
	if s.closed {
		return s.closedErr()
	}
	s.pending = appendRecord(s.pending, kind, slot, payload)
	s.cond.Signal()
	return nil
}

func (s *sender) closedErr() error {
	if s.err != nil {
		return s.err
	}
	return io.ErrClosedPipe
}

func (s *sender) putLarge(kind byte, slot uint64, payload []byte) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return s.closedErr()
	}
	head := appendHeader(s.pending, kind, slot, len(payload))
	s.pending = nil
	s.mu.Unlock()
	if err := s.write(head); err != nil {
		return err
	}
	return s.write(payload)
}

func (s *sender) write(b []byte) error {
	_, err := s.w.Write(b)
	if err != nil {
		s.mu.Lock()
		s.closed, s.err = true, err
		s.room.Broadcast()
		s.mu.Unlock()
	}
	return err
}

// loop sends what is pending, a message at a time, until closed.
func (s *sender) loop() {
	var buf []byte
	for {
		s.mu.Lock()
		for len(s.pending) == 0 && !s.closed {
			s.cond.Wait()
		}
		if s.closed && len(s.pending) == 0 {
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		// Let the other goroutines of this round put theirs first.
		runtime.Gosched()
		s.writeMu.Lock()
		s.mu.Lock()
		buf, s.pending = s.pending, buf[:0]
		s.room.Broadcast()
		s.mu.Unlock()
		if len(buf) > 0 {
			s.write(buf)
		}
		s.writeMu.Unlock()
	}
}

// abort ends the stream at once, dropping what is pending: a write that
// waits for the reader (a window ahead of it) returns.
func (s *sender) abort() {
	s.mu.Lock()
	s.closed, s.pending = true, nil
	s.cond.Signal()
	s.room.Broadcast()
	s.mu.Unlock()
	s.w.Close()
}

// close sends what is pending and ends the stream.
func (s *sender) close() {
	s.mu.Lock()
	was := s.closed
	s.closed = true
	s.cond.Signal()
	s.room.Broadcast()
	s.mu.Unlock()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	buf := s.pending
	s.pending = nil
	s.mu.Unlock()
	if !was && len(buf) > 0 {
		s.w.Write(buf)
	}
	s.w.Close()
}

// A pipe is one direction of a worker's stream at the receiving end of a
// host's stream: the records for it, in order, without a limit (what is
// in it has already crossed the network), until it is closed.
type pipe struct {
	mu     sync.Mutex
	cond   *sync.Cond
	bufs   [][]byte
	err    error // after bufs: io.EOF or why the writer closed it
	closed bool  // the reader closed it: what comes is dropped
}

func newPipe() *pipe {
	p := &pipe{}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// write appends b, which the pipe keeps, and reports whether it did: a
// pipe that was ended or closed drops it.
func (p *pipe) write(b []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil || p.closed {
		return false
	}
	if len(b) > 0 {
		p.bufs = append(p.bufs, b)
		p.cond.Signal()
	}
	return true
}

// empty reports whether the pipe holds nothing to read.
func (p *pipe) empty() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.bufs) == 0
}

// end makes the reader read err (io.EOF for a clean end) after what was
// written.
func (p *pipe) end(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
		p.cond.Broadcast()
	}
}

// wait waits, with p.mu held, until the pipe has something to read, or
// the error that ends it.
func (p *pipe) wait() error {
	for len(p.bufs) == 0 && p.err == nil && !p.closed {
		p.cond.Wait()
	}
	switch {
	case p.closed:
		return io.ErrClosedPipe
	case len(p.bufs) == 0:
		return p.err
	}
	return nil
}

func (p *pipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.wait(); err != nil {
		return 0, err
	}
	n := copy(b, p.bufs[0])
	if n == len(p.bufs[0]) {
		p.bufs[0] = nil
		p.bufs = p.bufs[1:]
	} else {
		p.bufs[0] = p.bufs[0][n:]
	}
	return n, nil
}

// Close drops what is in the pipe and what comes; a Read waiting returns.
func (p *pipe) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed, p.bufs = true, nil
	p.cond.Broadcast()
	return nil
}

// next returns what the pipe holds, at least one buffer, waiting for it;
// or the error that ends it. For a writer that hands whole buffers on.
func (p *pipe) next() ([][]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.wait(); err != nil {
		return nil, err
	}
	bufs := p.bufs
	p.bufs = nil
	return bufs, nil
}

// validID reports whether id can go into a subject: a plain token of
// letters, digits, '-' and '_', of at most 64 bytes. A join request's id
// goes into the host's subjects: a '.', '*' or '>' in it would name other
// subjects (another host's, or all of them).
func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

var errHostGone = errors.New("cluster: the pool gave this host up")
