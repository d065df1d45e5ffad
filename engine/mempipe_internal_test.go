package engine

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"
)

// TestMemPipe: what is written is read in order, in pieces as the reader
// asks; the reader sees io.EOF once the writer has closed and all was
// read; closing the read end makes writes fail and wakes a waiting read.
func TestMemPipe(t *testing.T) {
	r, w := newMemPipe()
	got := make(chan []byte)
	go func() {
		b, err := io.ReadAll(r)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	var want []byte
	for i := range 1000 {
		p := []byte{byte(i), byte(i >> 8), 'x'}
		want = append(want, p...)
		if n, err := w.Write(p); n != len(p) || err != nil {
			t.Fatalf("write: %d, %v", n, err)
		}
	}
	w.Close()
	if b := <-got; string(b) != string(want) {
		t.Errorf("read %d bytes, not the %d written in order", len(b), len(want))
	}
	if _, err := w.Write([]byte("late")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("a write after the writer's close: %v", err)
	}

	r, w = newMemPipe()
	done := make(chan error)
	go func() {
		_, err := r.Read(make([]byte, 8))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a read of an empty pipe returned: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	r.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("a read waiting when its end closed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("closing the read end did not wake the read")
	}
	if _, err := w.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("a write after the reader's close: %v", err)
	}
}
