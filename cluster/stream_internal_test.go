package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/poolrun/poolrun/cluster/hub"
	"github.com/poolrun/poolrun/internal/proctest"
)

func connect(t testing.TB, s *hub.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.URL(), nats.Token(s.Token()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestStream: what is written arrives whole and in order, in writes of
// every size (a 3 MiB one crosses in several messages), then io.EOF.
func TestStream(t *testing.T) {
	s, err := hub.Start("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, b := connect(t, s), connect(t, s)
	r, err := newStreamReader(b, "poolrun.test.stream")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b.Flush() // the subscription is in place before anything is written
	w := newStreamWriter(a, "poolrun.test.stream")
	var sent bytes.Buffer
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 5, 0, 100, chunkSize - 1, chunkSize, chunkSize + 1, 3 << 20, 7} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.IntN(256))
		}
		if k, err := w.Write(p); err != nil || k != n {
			t.Fatalf("Write(%d bytes) = %d, %v", n, k, err)
		}
		sent.Write(p)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sent.Bytes()) {
		t.Fatalf("read %d bytes, want the %d written", len(got), sent.Len())
	}
	if _, err := w.Write([]byte("x")); err == nil {
		t.Error("a write after Close succeeded")
	}
}

// TestStreamLost: a message missing from the stream ends it with an error,
// never with bytes out of order.
func TestStreamLost(t *testing.T) {
	s, err := hub.Start("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, b := connect(t, s), connect(t, s)
	r, err := newStreamReader(b, "poolrun.test.lost")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b.Flush()
	msg := func(seq uint64, data string) []byte {
		return append(append(binary.BigEndian.AppendUint64(nil, seq), kindData), data...)
	}
	a.Publish("poolrun.test.lost", msg(1, "one "))
	a.Publish("poolrun.test.lost", msg(3, "three"))
	a.Flush()
	got, err := io.ReadAll(r)
	if string(got) != "one " || !errors.Is(err, errLost) {
		t.Fatalf("read %q, %v; want %q and a lost message", got, err, "one ")
	}
}

// streamPair starts a server and a stream on subject from a writer on one
// connection to a reader on another, and returns the reader's connection.
func streamPair(t *testing.T, subject string) (*streamWriter, *streamReader, *nats.Conn) {
	t.Helper()
	s, err := hub.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	a, b := connect(t, s), connect(t, s)
	r, err := newStreamReader(b, subject)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	b.Flush() // the subscriptions are in place before anything is written
	return newStreamWriter(a, subject), r, b
}

// writeAhead writes n random bytes to w in one Write, from a goroutine,
// and returns them and the channel of the Write's error; it returns once
// the reader's client holds a window of them (the writer waits for the
// reader then).
func writeAhead(t *testing.T, w *streamWriter, r *streamReader, n int) ([]byte, <-chan error) {
	t.Helper()
	p := make([]byte, n)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range p {
		p[i] = byte(rng.IntN(256))
	}
	done := make(chan error, 1)
	go func() {
		_, err := w.Write(p)
		done <- err
	}()
	err := proctest.Poll(context.Background(), "a window in the reader's client", time.Millisecond, func() bool {
		msgs, _, _ := r.sub.Pending()
		return msgs >= window/chunkSize
	})
	if err != nil {
		t.Fatal(err)
	}
	return p, done
}

// TestStreamWindow: a writer a window ahead of its reader waits while
// the reader does not read, and sends no more meanwhile; a reader that has
// read less than ackEvery says so only when the writer asks (a probe),
// which lets the writer on; when the reader reads, what arrives is exactly
// what was written.
func TestStreamWindow(t *testing.T) {
	w, r, _ := streamPair(t, "poolrun.test.window")
	sent, done := writeAhead(t, w, r, 4*window+12345)
	select {
	case err := <-done:
		t.Fatalf("a Write of %d bytes returned (%v) with the reader not reading", len(sent), err)
	case <-time.After(3 * probeEvery):
	}
	if msgs, bytes, _ := r.sub.Pending(); msgs != window/chunkSize || bytes > window+msgs*headerSize {
		t.Errorf("the reader's client holds %d messages, %d bytes; want the window, %d bytes in %d", msgs, bytes, window, window/chunkSize)
	}
	got := make([]byte, chunkSize)
	if _, err := io.ReadFull(r, got); err != nil {
		t.Fatal(err)
	}
	err := proctest.Poll(context.Background(), "the writer's next message, after its probe", time.Millisecond, func() bool {
		return r.heard() == window/chunkSize+1
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if err := <-done; err != nil {
			t.Errorf("Write: %v", err)
		}
		w.Close()
	}()
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if got = append(got, rest...); !bytes.Equal(got, sent) {
		t.Fatalf("read %d bytes, not the %d written", len(got), len(sent))
	}
}

// TestStreamWriterWaitEnds: a Write that waits for its reader fails, well
// before readerSilence, when the reader closes, when the reader's
// connection ends, and when the writer is closed from another goroutine.
func TestStreamWriterWaitEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(w *streamWriter, r *streamReader, rc *nats.Conn) error
		want error
	}{
		{"reader closed", func(_ *streamWriter, r *streamReader, _ *nats.Conn) error { return r.Close() }, errGone},
		{"reader's connection closed", func(_ *streamWriter, _ *streamReader, rc *nats.Conn) error { rc.Close(); return nil }, errGone},
		{"writer closed", func(w *streamWriter, _ *streamReader, _ *nats.Conn) error { return w.Close() }, io.ErrClosedPipe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, r, rc := streamPair(t, "poolrun.test.ends")
			_, done := writeAhead(t, w, r, 2*window)
			if err := tc.end(w, r, rc); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if !errors.Is(err, tc.want) {
					t.Fatalf("Write: %v, want %v", err, tc.want)
				}
			case <-time.After(readerSilence / 3):
				t.Fatalf("Write still waits %v after it", readerSilence/3)
			}
			if _, err := w.Write([]byte("x")); !errors.Is(err, tc.want) {
				t.Errorf("a Write after it: %v, want %v", err, tc.want)
			}
		})
	}
}
