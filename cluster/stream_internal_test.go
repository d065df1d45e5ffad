package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/nats-io/nats.go"
)

func connect(t testing.TB, s *Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.URL(), nats.Token(s.token))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestStream: what is written arrives whole and in order, in writes of
// every size (a 3 MiB one crosses in several messages), then io.EOF.
func TestStream(t *testing.T) {
	s, err := Start("")
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
	s, err := Start("")
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
