package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
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
//
// Flow control. Core NATS does not slow a publisher for a subscriber that
// is behind: the server buffers for it, and closes its connection when
// that exceeds a limit (a slow consumer); a large value written at once
// would sit whole in the pool's process, in the server, and its worker be
// lost. A reader therefore says how far it has read, on the stream's
// subject + ".ack": the count of bytes Read has returned, each time it has
// read ackEvery more, and that it has gone when it closes. A writer
// publishes at most window bytes beyond the last count it has heard, and
// waits in Write for the rest: the server and the reader's client hold at
// most a window of a stream, whatever the size of a write, and small
// writes never wait for a round trip.
//
// A reader may rightly be slow for long (a worker reads its next job when
// it has run the last): a writer that has waited probeEvery with no ack
// asks the reader on subject + ".live" how far it has read, and the
// reader's client answers from a goroutine of its own. A writer whose
// reader's subscription has gone (closed, its connection lost) hears from
// the server that nobody listens; one that hears nothing at all for
// readerSilence takes its reader for gone too. Its Write then fails, as a
// write to a pipe without a reader. The pool decides about a worker on its
// own silence, far shorter (see watchPings): readerSilence is the last
// resort of a writer whose reader's process hangs with its connection
// open, and long enough that a process stalled by its collector or by a
// loaded host is not taken for gone.

// chunkSize is the most bytes of a stream one message carries.
const chunkSize = 1 << 20

// Message header: 8 bytes of sequence number (from 1), then 1 byte: 0 data,
// 1 end of stream.
const (
	headerSize = 9
	kindData   = 0
	kindEnd    = 1
)

// window is the most bytes a writer publishes beyond what its reader has
// said it read. It bounds what a stream holds in the server and in the
// reader's client, and its speed to a window per round trip of an ack:
// 8 MiB keep a link of 10 Gb/s busy up to round trips of 5 ms, beyond
// any LAN's, while the streams of a connection that many workers share
// (the pool's, an agent's) hold little together. ackEvery is how much
// more a reader reads before it says so: a fraction of the window, so
// that acks are rare and the writer seldom runs out while one travels. A
// reader that has read all that was sent may not have said the last
// ackEvery-1 bytes of it: the window must leave the writer room for a
// chunk beyond them, or both would wait (the constant below does not
// compile otherwise).
const (
	window   = 8 << 20
	ackEvery = window / 4
	_        = uint(window - ackEvery - chunkSize)
)

// probeEvery is how long a writer waits for an ack before it asks its
// reader how far it has read, and again after each probeEvery;
// readerSilence is how long it waits for any word before it fails.
const (
	probeEvery    = pingEvery
	readerSilence = 30 * time.Second
)

// Ack: 8 bytes of the count of bytes read, then 1 byte: 0 read, 1 gone.
const (
	ackSize = 9
	ackRead = 0
	ackGone = 1
)

// errLost says that a message of a stream went missing.
var errLost = errors.New("cluster: a message of the stream was lost")

// errGone says that the reader of a stream has gone.
var errGone = errors.New("cluster: the stream's reader has gone")

func ackSubject(subject string) string  { return subject + ".ack" }
func liveSubject(subject string) string { return subject + ".live" }

// streamWriter writes a stream to a subject.
type streamWriter struct {
	nc      *nats.Conn
	subject string
	closed  atomic.Bool
	done    chan struct{} // closed by Close: a Write waiting returns

	mu     sync.Mutex // held by Write and Close; the rest is under it
	seq    uint64
	sent   uint64 // bytes of data published
	buf    []byte
	acks   chan *nats.Msg // the reader's acks, from the first Write on
	ackSub *nats.Subscription
	read   uint64 // bytes read, as the reader last said
	gone   bool   // the reader said that it closed, or nobody listens
}

func newStreamWriter(nc *nats.Conn, subject string) *streamWriter {
	return &streamWriter{nc: nc, subject: subject, done: make(chan struct{})}
}

// Write publishes p in messages of at most chunkSize bytes, each when the
// reader has said it read all but a window of what was written before.
// It fails when the writer is closed, also while it waits (a Close from
// another goroutine), and when the reader has gone: it said so, nobody
// listens on its subject, or it has said nothing for readerSilence.
func (w *streamWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed.Load() {
		return 0, io.ErrClosedPipe
	}
	if w.ackSub == nil {
		// Before the first message: the server has the subscription
		// when the reader reads it and answers. Acks come one for each
		// ackEvery bytes read, of a window at most, and each Write
		// takes those that came: few wait at once. One that the
		// client drops as its channel is full costs nothing, as the
		// next (or the answer to a probe) counts all.
		w.acks = make(chan *nats.Msg, 16)
		sub, err := w.nc.ChanSubscribe(ackSubject(w.subject), w.acks)
		if err != nil {
			return 0, fmt.Errorf("cluster: writing to %s: %w", w.subject, err)
		}
		w.ackSub = sub
	}
	n := 0
	for len(p) > 0 {
		k := min(len(p), chunkSize)
		if err := w.credit(k); err != nil {
			return n, err
		}
		if err := w.publish(kindData, p[:k]); err != nil {
			return n, err
		}
		w.sent += uint64(k)
		n += k
		p = p[k:]
	}
	return n, nil
}

// credit returns when k more bytes fit in the window, or fails. The acks
// that came are taken first; only a writer a window ahead waits.
func (w *streamWriter) credit(k int) error {
	for len(w.acks) > 0 {
		w.take(<-w.acks)
	}
	if w.gone {
		return fmt.Errorf("cluster: writing to %s: %w", w.subject, errGone)
	}
	if w.sent+uint64(k) <= w.read+window {
		return nil
	}
	probe := time.NewTimer(probeEvery)
	defer probe.Stop()
	heard := time.Now()
	for w.sent+uint64(k) > w.read+window {
		select {
		case m := <-w.acks:
			w.take(m)
			if w.gone {
				return fmt.Errorf("cluster: writing to %s: %w", w.subject, errGone)
			}
			heard = time.Now()
		case <-w.done:
			return io.ErrClosedPipe
		case <-probe.C:
			if time.Since(heard) >= readerSilence {
				return fmt.Errorf("cluster: writing to %s: %w: no word from it for %v", w.subject, errGone, readerSilence)
			}
			// The answer comes with the acks, or the server's word
			// that nobody listens.
			if err := w.nc.PublishRequest(liveSubject(w.subject), ackSubject(w.subject), nil); err != nil {
				return fmt.Errorf("cluster: writing to %s: %w", w.subject, err)
			}
			probe.Reset(probeEvery)
		}
	}
	return nil
}

// take notes an ack, or the server's answer to a probe that nobody
// listens (status 503, as nats.Conn.Request reads it).
func (w *streamWriter) take(m *nats.Msg) {
	if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
		w.gone = true
		return
	}
	if len(m.Data) != ackSize {
		return
	}
	if m.Data[8] == ackGone {
		w.gone = true
	}
	w.read = max(w.read, binary.BigEndian.Uint64(m.Data))
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
// A Write that waits for the reader, in another goroutine, returns
// io.ErrClosedPipe first. Closing twice is harmless.
func (w *streamWriter) Close() error {
	if !w.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(w.done)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ackSub != nil {
		w.ackSub.Unsubscribe()
	}
	err := w.publish(kindEnd, nil)
	if ferr := w.nc.Flush(); err == nil {
		err = ferr
	}
	return err
}

// streamReader reads a stream from a subject, in order.
type streamReader struct {
	nc   *nats.Conn
	ack  string // the subject of its acks
	sub  *nats.Subscription
	live *nats.Subscription // answers a writer's probes
	want uint64             // the next sequence number
	rest []byte             // of the message being read
	err  error              // sticky: io.EOF, errLost, or the end of the subscription
	read atomic.Uint64      // bytes returned by Read
	said uint64             // the count of the last ack
	msg  [ackSize]byte

	closeOnce sync.Once
}

// newStreamReader subscribes to subject. Subscribe before the writer
// writes: what is published before is not seen.
func newStreamReader(nc *nats.Conn, subject string) (*streamReader, error) {
	r := &streamReader{nc: nc, ack: ackSubject(subject), want: 1}
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		return nil, fmt.Errorf("cluster: subscribing to %s: %w", subject, err)
	}
	// A writer has at most a window that this reader has not read: twice
	// that waiting in the client is a writer that does not wait for
	// acks, and the stream is lost rather than the memory.
	if err := sub.SetPendingLimits(-1, 2*window); err != nil {
		sub.Unsubscribe()
		return nil, err
	}
	live, err := nc.Subscribe(liveSubject(subject), func(m *nats.Msg) {
		m.Respond(ackMessage(r.read.Load(), ackRead))
	})
	if err != nil {
		sub.Unsubscribe()
		return nil, fmt.Errorf("cluster: subscribing to %s: %w", liveSubject(subject), err)
	}
	r.sub, r.live = sub, live
	return r, nil
}

// ackMessage returns an ack of kind for read bytes.
func ackMessage(read uint64, kind byte) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, ackSize), read), kind)
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
	if read := r.read.Add(uint64(n)); read-r.said >= ackEvery {
		// A lost ack costs the writer a probe: the next one counts all.
		r.said = read
		binary.BigEndian.PutUint64(r.msg[:], read)
		r.msg[8] = ackRead
		r.nc.Publish(r.ack, r.msg[:])
	}
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

// Close unsubscribes and tells the writer, whose Write then fails; a Read
// waiting returns io.ErrClosedPipe.
func (r *streamReader) Close() error {
	var err error
	r.closeOnce.Do(func() {
		err = r.sub.Unsubscribe()
		r.live.Unsubscribe()
		r.nc.Publish(r.ack, ackMessage(r.read.Load(), ackGone))
	})
	return err
}
