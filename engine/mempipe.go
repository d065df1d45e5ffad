package engine

import (
	"io"
	"os"
	"sync"
)

// A memPipe carries the frames of a link to a worker that is a goroutine
// of this process (serial mode, InProcess), as an OS pipe carries those
// of a worker process, in memory: no system call, and no wait in the
// network poller, between the scheduler and the worker. Its writes never
// wait (what a link sends is bounded by the scheduler: see maxInFlight);
// a read waits until there is something to read or the writer has closed
// its end. Closing the read end makes writes fail and a waiting read
// return.
type memPipe struct {
	mu      sync.Mutex
	buf     []byte
	off     int  // buf[off:] is unread
	wClosed bool // no more writes: reads end at io.EOF
	rClosed bool
	ready   chan struct{} // signalled on a write or a close: one reader waits on it
}

// newMemPipe returns the two ends of a new memPipe.
func newMemPipe() (*memPipeReader, *memPipeWriter) {
	p := &memPipe{ready: make(chan struct{}, 1)}
	return &memPipeReader{p}, &memPipeWriter{p}
}

type memPipeReader struct{ p *memPipe }
type memPipeWriter struct{ p *memPipe }

func (p *memPipe) signal() {
	select {
	case p.ready <- struct{}{}:
	default:
	}
}

func (r *memPipeReader) Read(b []byte) (int, error) {
	p := r.p
	for {
		p.mu.Lock()
		switch {
		case p.rClosed:
			p.mu.Unlock()
			return 0, os.ErrClosed
		case p.off < len(p.buf):
			n := copy(b, p.buf[p.off:])
			p.off += n
			if p.off == len(p.buf) {
				p.buf, p.off = p.buf[:0], 0
			}
			p.mu.Unlock()
			return n, nil
		case p.wClosed:
			p.mu.Unlock()
			return 0, io.EOF
		}
		p.mu.Unlock()
		<-p.ready
	}
}

func (r *memPipeReader) Close() error {
	p := r.p
	p.mu.Lock()
	p.rClosed = true
	p.buf, p.off = nil, 0
	p.mu.Unlock()
	p.signal()
	return nil
}

func (w *memPipeWriter) Write(b []byte) (int, error) {
	p := w.p
	p.mu.Lock()
	switch {
	case p.wClosed:
		p.mu.Unlock()
		return 0, os.ErrClosed
	case p.rClosed:
		p.mu.Unlock()
		return 0, io.ErrClosedPipe
	}
	p.buf = append(p.buf, b...)
	p.mu.Unlock()
	p.signal()
	return len(b), nil
}

func (w *memPipeWriter) Close() error {
	p := w.p
	p.mu.Lock()
	p.wClosed = true
	p.mu.Unlock()
	p.signal()
	return nil
}
