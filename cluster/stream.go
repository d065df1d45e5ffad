package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// A byte stream over NATS subjects: the pipe protocol's frames between the
// pool and one remote worker travel as a stream each way (and the control
// stream), cut into messages of at most chunkSize bytes. Core NATS keeps
// the order of one publisher's messages to a subscriber but may drop them
// (a slow consumer); every message therefore carries its place in the
// stream, and a reader that finds one missing ends the stream with an
// error: the worker is then lost, as a worker whose pipe broke.

// chunkSize is the most bytes of a stream one message carries.
const chunkSize = 1 << 20

// Message header: 8 bytes of sequence number (from 1), then 1 byte: 0 data,
// 1 end of stream.
const (
	headerSize = 9
	kindData   = 0
	kindEnd    = 1
)

// errLost says that a message of a stream went missing.
var errLost = errors.New("cluster: a message of the stream was lost")

// streamWriter writes a stream to a subject.
type streamWriter struct {
	nc      *nats.Conn
	subject string
	mu      sync.Mutex
	seq     uint64
	closed  bool
	buf     []byte
}

func newStreamWriter(nc *nats.Conn, subject string) *streamWriter {
	return &streamWriter{nc: nc, subject: subject}
}

// Write publishes p in messages of at most chunkSize bytes. It does not
// wait for the reader: NATS buffers, and a reader that falls behind loses
// the stream rather than slowing the writer.
func (w *streamWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, io.ErrClosedPipe
	}
	n := 0
	for len(p) > 0 {
		k := min(len(p), chunkSize)
		if err := w.publish(kindData, p[:k]); err != nil {
			return n, err
		}
		n += k
		p = p[k:]
	}
	return n, nil
}

func (w *streamWriter) publish(kind byte, data []byte) error {
	w.seq++
	w.buf = binary.BigEndian.AppendUint64(w.buf[:0], w.seq)
	w.buf = append(w.buf, kind)
	w.buf = append(w.buf, data...)
	if err := w.nc.Publish(w.subject, w.buf); err != nil {
		return fmt.Errorf("cluster: writing to %s: %w", w.subject, err)
	}
	return nil
}

// Close ends the stream: the reader reads io.EOF after what was written.
func (w *streamWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	err := w.publish(kindEnd, nil)
	if ferr := w.nc.Flush(); err == nil {
		err = ferr
	}
	return err
}

// streamReader reads a stream from a subject, in order.
type streamReader struct {
	sub  *nats.Subscription
	want uint64 // the next sequence number
	rest []byte // of the message being read
	err  error  // sticky: io.EOF, errLost, or the end of the subscription

	closeOnce sync.Once
}

// newStreamReader subscribes to subject. Subscribe before the writer
// writes: what is published before is not seen.
func newStreamReader(nc *nats.Conn, subject string) (*streamReader, error) {
	r := &streamReader{want: 1}
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		return nil, fmt.Errorf("cluster: subscribing to %s: %w", subject, err)
	}
	// Up to 1 GiB waiting in the client before it drops (and the stream
	// is lost): a worker's reply may be 64 MiB.
	if err := sub.SetPendingLimits(-1, 1<<30); err != nil {
		sub.Unsubscribe()
		return nil, err
	}
	r.sub = sub
	return r, nil
}

func (r *streamReader) Read(p []byte) (int, error) {
	for len(r.rest) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		m, err := r.sub.NextMsg(time.Hour)
		switch {
		case errors.Is(err, nats.ErrTimeout):
			continue
		case errors.Is(err, nats.ErrSlowConsumer):
			r.err = fmt.Errorf("%w: the reader fell behind: %v", errLost, err)
			continue
		case err != nil:
			r.err = io.ErrClosedPipe
			continue
		}
		if len(m.Data) < headerSize {
			r.err = fmt.Errorf("cluster: a message of %d bytes on %s: not a stream's", len(m.Data), m.Subject)
			continue
		}
		if seq := binary.BigEndian.Uint64(m.Data); seq != r.want {
			r.err = fmt.Errorf("%w: message %d came where %d was due", errLost, seq, r.want)
			continue
		}
		r.want++
		switch m.Data[8] {
		case kindData:
			r.rest = m.Data[headerSize:]
		case kindEnd:
			r.err = io.EOF
		default:
			r.err = fmt.Errorf("cluster: a message of kind %d on %s", m.Data[8], m.Subject)
		}
	}
	n := copy(p, r.rest)
	r.rest = r.rest[n:]
	return n, nil
}

// heard counts the messages of the stream that reached this process:
// those read and those waiting in the client. A worker busy sending a
// large reply is not silent, though its pings queue behind the reply.
func (r *streamReader) heard() int64 {
	delivered, _ := r.sub.Delivered()
	pending, _, _ := r.sub.Pending()
	return delivered + int64(pending)
}

// Close unsubscribes; a Read waiting returns io.ErrClosedPipe.
func (r *streamReader) Close() error {
	var err error
	r.closeOnce.Do(func() { err = r.sub.Unsubscribe() })
	return err
}
