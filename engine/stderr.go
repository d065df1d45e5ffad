package engine

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// stderrDrain is how long, after a worker process has ended, the parent
// waits for the rest of what it wrote to its stderr.
const stderrDrain = 250 * time.Millisecond

// stderrTailSize is how much of a worker's stderr the parent keeps.
const stderrTailSize = 4 << 10

// stderrTail passes a worker process's stderr on to this process's and
// keeps its last stderrTailSize bytes.
type stderrTail struct {
	mu   sync.Mutex
	buf  []byte
	done chan struct{} // closed at the end of the stream
}

func newStderrTail(r io.ReadCloser) *stderrTail {
	t := &stderrTail{done: make(chan struct{})}
	go t.copy(r)
	return t
}

func (t *stderrTail) copy(r io.ReadCloser) {
	defer close(t.done)
	defer r.Close()
	b := make([]byte, 32<<10)
	for {
		n, err := r.Read(b)
		if n > 0 {
			os.Stderr.Write(b[:n])
			t.mu.Lock()
			t.buf = append(t.buf, b[:n]...)
			if len(t.buf) > stderrTailSize {
				t.buf = append(t.buf[:0], t.buf[len(t.buf)-stderrTailSize:]...)
			}
			t.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// wait waits up to d for the end of the stream (processes the worker
// started may hold it open).
func (t *stderrTail) wait(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-t.done:
	case <-timer.C:
	}
}

// last returns the last few non-empty lines kept, at most about 500 bytes,
// joined by " | ", or "".
func (t *stderrTail) last() string {
	t.mu.Lock()
	b := bytes.TrimSpace(t.buf)
	t.mu.Unlock()
	const most = 500
	var lines []string
	n := 0
	for len(b) > 0 && len(lines) < 3 && n < most {
		i := bytes.LastIndexByte(b, '\n')
		line := string(bytes.TrimSpace(b[i+1:]))
		b = bytes.TrimSpace(b[:max(i, 0)])
		if line == "" {
			continue
		}
		if len(line) > most {
			line = "…" + strings.ToValidUTF8(line[len(line)-most:], "")
		}
		lines = append(lines, line)
		n += len(line)
	}
	for i, j := 0, len(lines)-1; i < j; i, j = i+1, j-1 {
		lines[i], lines[j] = lines[j], lines[i]
	}
	return strings.Join(lines, " | ")
}
