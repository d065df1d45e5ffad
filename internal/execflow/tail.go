package execflow

import (
	"bytes"
	"strings"
	"sync"
)

// maxTailLine bounds the bytes kept of one line of a tail; the rest of a
// longer line is dropped and marked.
const maxTailLine = 1024

// truncMark ends a line of a tail that was cut at maxTailLine bytes.
const truncMark = " [...]"

// tailWriter keeps the last n lines written to it, each cut to maxTailLine
// bytes. It is safe for concurrent use.
type tailWriter struct {
	mu    sync.Mutex
	n     int
	lines []string // ring of at most n complete lines
	first int      // index of the oldest line once the ring is full
	cur   []byte   // the line being written
	cut   bool     // cur was cut
}

func newTailWriter(n int) *tailWriter {
	return &tailWriter{n: max(n, 0)}
}

// Write never fails.
func (t *tailWriter) Write(p []byte) (int, error) {
	if t.n == 0 {
		return len(p), nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		part := p
		if i >= 0 {
			part = p[:i]
		}
		if room := maxTailLine - len(t.cur); len(part) > room {
			t.cur = append(t.cur, part[:max(room, 0)]...)
			t.cut = true
		} else {
			t.cur = append(t.cur, part...)
		}
		if i < 0 {
			break
		}
		t.endLine()
		p = p[i+1:]
	}
	return n, nil
}

// endLine moves the current line into the ring.
func (t *tailWriter) endLine() {
	line := string(t.cur)
	if t.cut {
		line += truncMark
	}
	t.cur, t.cut = t.cur[:0], false
	if len(t.lines) < t.n {
		t.lines = append(t.lines, line)
		return
	}
	t.lines[t.first] = line
	t.first = (t.first + 1) % t.n
}

// String returns the kept lines, oldest first, joined by newlines, without
// a final newline. An unfinished last line counts as a line.
func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := make([]string, 0, len(t.lines)+1)
	lines = append(lines, t.lines[t.first:]...)
	lines = append(lines, t.lines[:t.first]...)
	if len(t.cur) > 0 || t.cut {
		last := string(t.cur)
		if t.cut {
			last += truncMark
		}
		lines = append(lines, last)
		if len(lines) > t.n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
