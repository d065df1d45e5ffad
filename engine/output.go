package engine

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/poolrun/poolrun/internal/pipecopy"
)

// What workers print. A worker process's standard output and error are
// pipes to this process, each copied by a goroutine to the pool's
// WorkerOutput writers in whole lines (lineWriter); the stderr copy also
// keeps the stream's tail, which the error of a crash loop quotes. In
// serial mode a job finds the same line writers through JobOutput. A
// remote worker's output comes from its transport (RemoteWorker.Stdout,
// Stderr) and is copied the same way (readCopy).

// outputDrain is how long, after a worker process has ended, the parent
// waits for the end of its output: processes the worker started and left
// behind may hold its pipes open. Then it copies what the pipes hold, and
// no more, and closes its ends.
const outputDrain = 250 * time.Millisecond

// maxOutputLine is the longest piece of a line that a lineWriter holds:
// a longer line is passed on in pieces of this size.
const maxOutputLine = 64 << 10

// stderrTailSize is how much of a worker's stderr the parent keeps.
const stderrTailSize = 4 << 10

// workerOutput is where the parent writes what its workers print (see
// WorkerOutput); nil fields mean os.Stdout and os.Stderr.
type workerOutput struct {
	stdout, stderr io.Writer
}

func (o workerOutput) out() io.Writer {
	if o.stdout == nil {
		return os.Stdout
	}
	return o.stdout
}

func (o workerOutput) err() io.Writer {
	if o.stderr == nil {
		return os.Stderr
	}
	return o.stderr
}

// jobOutputKey is the context key of a serial job's jobOutput.
type jobOutputKey struct{}

// jobOutput is where a serial worker's jobs print.
type jobOutput struct {
	stdout, stderr *lineWriter
}

// JobOutput returns where a job that runs with ctx should print, so that
// what it prints reaches the pool's [WorkerOutput] writers in whole lines.
//
//   - In a worker process: os.Stdout and os.Stderr, pipes to the pool's
//     process (or to the host agent that passes them on).
//   - In serial mode and in a host agent's goroutine worker: writers that
//     pass whole lines on to the pool's writers.
//   - With a context that is no job's: os.Stdout and os.Stderr.
//
// A job that prints to os.Stdout itself in serial mode bypasses the
// pool's writers.
func JobOutput(ctx context.Context) (stdout, stderr io.Writer) {
	if o, ok := ctx.Value(jobOutputKey{}).(*jobOutput); ok {
		return o.stdout, o.stderr
	}
	return os.Stdout, os.Stderr
}

// lineWriter passes what is written to it on to w in whole lines: each
// write to w holds complete lines, but for a line longer than
// maxOutputLine, which goes in pieces of that size, and the unfinished
// line that flush passes on. Errors of w are ignored: what w cannot take
// is lost, and the writer is not held up. It is safe for concurrent use.
type lineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte // the unfinished line, fewer than maxOutputLine bytes
}

func newLineWriter(w io.Writer) *lineWriter { return &lineWriter{w: w} }

// Write never fails.
func (lw *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if last := bytes.LastIndexByte(p, '\n'); last >= 0 {
		if len(lw.buf) > 0 {
			// The unfinished line ends with p's first.
			first := bytes.IndexByte(p, '\n')
			lw.buf = append(lw.buf, p[:first+1]...)
			lw.w.Write(lw.buf)
			lw.buf = lw.buf[:0]
			p = p[first+1:]
			last -= first + 1
		}
		if last >= 0 {
			lw.w.Write(p[:last+1])
			p = p[last+1:]
		}
	}
	for len(lw.buf)+len(p) >= maxOutputLine {
		k := maxOutputLine - len(lw.buf)
		if len(lw.buf) == 0 {
			lw.w.Write(p[:k])
		} else {
			lw.buf = append(lw.buf, p[:k]...)
			lw.w.Write(lw.buf)
			lw.buf = lw.buf[:0]
		}
		p = p[k:]
	}
	lw.buf = append(lw.buf, p...)
	return n, nil
}

// flush passes on the unfinished line, if any.
func (lw *lineWriter) flush() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if len(lw.buf) > 0 {
		lw.w.Write(lw.buf)
		lw.buf = lw.buf[:0]
	}
}

// outputCopy copies one output stream of a worker process (the parent's
// end of its pipe) to a writer in whole lines, and keeps the stream's
// last stderrTailSize bytes if asked to.
type outputCopy struct {
	c    *pipecopy.Copy
	tail *tailBuffer // nil: none kept
}

// startCopy starts copying r to w; with keepTail, the copy keeps the
// stream's tail.
func startCopy(r *os.File, w io.Writer, keepTail bool) *outputCopy {
	oc := &outputCopy{}
	if keepTail {
		oc.tail = &tailBuffer{}
	}
	lw := newLineWriter(w)
	oc.c = pipecopy.Start(r, func(b []byte) {
		if oc.tail != nil {
			oc.tail.add(b)
		}
		lw.Write(b)
	}, lw.flush)
	return oc
}

// end waits until deadline for the end of the stream, then copies what
// the pipe holds, closes it and returns once the copy has made its last
// write (see pipecopy.Copy.End).
func (c *outputCopy) end(deadline time.Time) { c.c.End(deadline) }

// readCopy copies one output stream of a remote worker, as its transport
// brings it (RemoteWorker.Stdout, Stderr), to a writer in whole lines.
type readCopy struct {
	r    io.ReadCloser
	done chan struct{} // closed once the last write has been made
}

// startReadCopy starts copying r to w until r ends.
func startReadCopy(r io.ReadCloser, w io.Writer) *readCopy {
	c := &readCopy{r: r, done: make(chan struct{})}
	lw := newLineWriter(w)
	go func() {
		defer close(c.done)
		defer lw.flush()
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				lw.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	return c
}

// end waits until deadline for the end of the stream, then closes it (a
// Read that waits returns) and returns once the copy has made its last
// write.
func (c *readCopy) end(deadline time.Time) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		c.r.Close()
		<-c.done
	}
	c.r.Close()
}

// last returns the last few non-empty lines of the tail kept, or "".
func (c *outputCopy) last() string {
	if c == nil || c.tail == nil {
		return ""
	}
	return c.tail.last()
}

// tailBuffer keeps the last stderrTailSize bytes added to it. It is safe
// for concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) add(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > stderrTailSize {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-stderrTailSize:]...)
	}
}

// last returns the last few non-empty lines kept, at most about 500 bytes,
// joined by " | ", or "".
func (t *tailBuffer) last() string {
	t.mu.Lock()
	b := bytes.TrimSpace(bytes.Clone(t.buf))
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

// windowFileKey is the context key of the file of the window a worker
// reads (JobWindow).
type windowFileKey struct{}

// JobWindow returns the file of the window that the worker running a job
// with ctx reads, open read-only, for a program the job starts to read
// the window itself: hand it over in os/exec.Cmd.ExtraFiles, and map it
// read-only there (docs/WINDOW.md has its layout). The worker owns it: do
// not close it. It returns nil with a context that is no job's, and where
// the worker reads no window that another process can map.
func JobWindow(ctx context.Context) *os.File {
	f, _ := ctx.Value(windowFileKey{}).(*os.File)
	return f
}
