package test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
)

// printArg says what printLines prints.
type printArg struct {
	Job   int
	Lines int    // "job J out K" on stdout and "job J err K" on stderr, each in three writes
	Long  int    // then a line of this many bytes on stdout, if not 0
	Last  string // then this on stdout, without a newline
}

// printLines prints through engine.JobOutput, a line in several writes: in
// a worker process each write is a write to the worker's pipe, so that
// only the parent's copy can make whole lines of them.
var printLines = engine.Register("test.print", func(ctx context.Context, a printArg) (int, error) {
	stdout, stderr := engine.JobOutput(ctx)
	for k := range a.Lines {
		for _, w := range []struct {
			w    io.Writer
			what string
		}{{stdout, "out"}, {stderr, "err"}} {
			fmt.Fprintf(w.w, "job %d ", a.Job)
			fmt.Fprintf(w.w, "%s %d", w.what, k)
			io.WriteString(w.w, "\n")
		}
	}
	if a.Long > 0 {
		long := longLine(a.Long)
		for len(long) > 0 { // in writes of 10,000 bytes
			n := min(len(long), 10000)
			io.WriteString(stdout, long[:n])
			long = long[n:]
		}
		io.WriteString(stdout, "\n")
	}
	io.WriteString(stdout, a.Last)
	return a.Lines, nil
})

// longLine is the long line printLines prints: n bytes of 'x'.
func longLine(n int) string { return strings.Repeat("x", n) }

// writeRecorder records every write it is given.
type writeRecorder struct {
	mu     sync.Mutex
	writes []string
}

func (r *writeRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

func (r *writeRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.writes...)
}

// maxLinePiece is the engine's bound on the piece of a line it holds
// (WorkerOutput's documentation).
const maxLinePiece = 64 << 10

// TestWorkerOutputWholeLines runs jobs that print many lines, each in
// several writes, on two workers at once and serially: every write to the
// pool's WorkerOutput writers holds whole lines, every line arrives once
// and in its job's order by the time Run returns, and a line longer than
// the engine's bound comes in pieces of that bound that add up to it.
func TestWorkerOutputWholeLines(t *testing.T) {
	// Not over the cluster: a remote worker's output stays on its host.
	localModes(t, func(t *testing.T, tr transport) {
		var stdout, stderr writeRecorder
		p := tr.New(t, engine.WorkerOutput(&stdout, &stderr))
		const jobs, lines, long = 6, 300, 150 << 10
		for j := range jobs {
			a := printArg{Job: j, Lines: lines}
			if j == 0 {
				a.Long = long
			}
			engine.Queue(p, printLines, a)
		}
		if err := p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, s := range []struct {
			name string
			rec  *writeRecorder
			what string
		}{{"stdout", &stdout, "out"}, {"stderr", &stderr, "err"}} {
			writes := s.rec.all()
			next := make([]int, jobs) // each job's next line number
			var longSeen strings.Builder
			for _, w := range writes {
				if strings.HasPrefix(w, "x") {
					// The long line: pieces of the bound, then the rest
					// and its newline, which may share its write with
					// the whole lines that came next from the worker.
					end := strings.IndexByte(w, '\n')
					if end < 0 {
						if len(w) != maxLinePiece || strings.Trim(w, "x") != "" {
							t.Errorf("%s: a write of %d bytes of the long line, want %d or the line's end", s.name, len(w), maxLinePiece)
						}
						longSeen.WriteString(w)
						continue
					}
					if strings.Trim(w[:end], "x") != "" {
						t.Errorf("%s: the long line's end holds more than 'x': %.80q", s.name, w[:end])
					}
					longSeen.WriteString(w[:end+1])
					if w = w[end+1:]; w == "" {
						continue
					}
				}
				if !strings.HasSuffix(w, "\n") {
					t.Fatalf("%s: a write of %d bytes that does not end a line: %.80q", s.name, len(w), w)
				}
				for _, line := range strings.Split(strings.TrimSuffix(w, "\n"), "\n") {
					var j, k int
					var what string
					if _, err := fmt.Sscanf(line, "job %d %s %d", &j, &what, &k); err != nil || what != s.what || j < 0 || j >= jobs || fmt.Sprintf("job %d %s %d", j, what, k) != line {
						t.Fatalf("%s: line %q is not whole", s.name, line)
					}
					if k != next[j] {
						t.Fatalf("%s: job %d: line %d after line %d", s.name, j, k, next[j]-1)
					}
					next[j]++
				}
			}
			for j, n := range next {
				if n != lines {
					t.Errorf("%s: job %d: %d lines arrived, want %d", s.name, j, n, lines)
				}
			}
			if want := map[string]string{"out": longLine(long) + "\n"}[s.what]; longSeen.String() != want {
				t.Errorf("%s: the long line came as %d bytes, want %d", s.name, longSeen.Len(), len(want))
			}
			t.Logf("%s: %d lines in %d writes", s.name, jobs*lines, len(writes))
		}
	})
}

// TestWorkerOutputUnfinishedLine: what a worker prints last without a
// newline comes when it ends, as it is, after the lines it ended.
func TestWorkerOutputUnfinishedLine(t *testing.T) {
	// Not over the cluster: a remote worker's output stays on its host.
	localModes(t, func(t *testing.T, tr transport) {
		var stdout, stderr writeRecorder
		p := tr.New(t, engine.WorkerOutput(&stdout, &stderr))
		engine.Queue(p, printLines, printArg{Job: 1, Lines: 2, Last: "no newline"})
		if err := p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		writes := stdout.all()
		if got, want := strings.Join(writes, ""), "job 1 out 0\njob 1 out 1\nno newline"; got != want {
			t.Fatalf("stdout got %q, want %q", got, want)
		}
		if last := writes[len(writes)-1]; last != "no newline" {
			t.Errorf("the last write is %q, want the unfinished line alone", last)
		}
	})
}

// slowRecorder is a writeRecorder that takes its time over each write.
type slowRecorder struct {
	writeRecorder
	delay time.Duration
}

func (r *slowRecorder) Write(p []byte) (int, error) {
	time.Sleep(r.delay)
	return r.writeRecorder.Write(p)
}

// TestWorkerOutputSlowWriter: writers slower than the worker lose
// nothing, though the worker has long exited (with more output in its
// pipes than the parent writes in the time it waits for their end).
func TestWorkerOutputSlowWriter(t *testing.T) {
	stdout := &slowRecorder{delay: 200 * time.Millisecond}
	stderr := &slowRecorder{delay: 200 * time.Millisecond}
	p := engine.New(engine.Workers(1), engine.WorkerOutput(stdout, stderr))
	const lines = 6000 // 70 KB on each stream
	engine.Queue(p, printLines, printArg{Job: 1, Lines: lines})
	start := time.Now()
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("Run took %v", time.Since(start).Round(time.Millisecond))
	for _, s := range []struct {
		name string
		rec  *slowRecorder
		what string
	}{{"stdout", stdout, "out"}, {"stderr", stderr, "err"}} {
		var want strings.Builder
		for k := range lines {
			fmt.Fprintf(&want, "job 1 %s %d\n", s.what, k)
		}
		if got := strings.Join(s.rec.all(), ""); got != want.String() {
			t.Errorf("%s: %d bytes arrived, want %d", s.name, len(got), want.Len())
		}
	}
}

// TestWorkerOutputCrashLoop: a worker that dies at start prints through
// WorkerOutput's stderr too, in whole lines, and the crash loop's error
// still quotes what the last one printed.
func TestWorkerOutputCrashLoop(t *testing.T) {
	t.Setenv(envDieAlways, "1")
	var stdout, stderr writeRecorder
	p := engine.New(engine.Workers(2), engine.WorkerOutput(&stdout, &stderr))
	engine.Queue(p, square, 3)
	err := p.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "it last printed: test worker: failing at start, as asked") {
		t.Fatalf("Run: %v", err)
	}
	writes := stderr.all()
	if len(writes) == 0 {
		t.Fatal("nothing reached WorkerOutput's stderr")
	}
	for _, w := range writes {
		for _, line := range strings.SplitAfter(w, "\n") {
			if line != "test worker: failing at start, as asked\n" && line != "" || !strings.HasSuffix(w, "\n") {
				t.Errorf("stderr got %q, want whole lines of what the workers printed", w)
			}
		}
	}
	if out := strings.Join(stdout.all(), ""); out != "" {
		t.Errorf("stdout got %q, want nothing", out)
	}
}

// TestJobOutputOutsideJobs: a context that is no job's gets this
// process's standard output and error.
func TestJobOutputOutsideJobs(t *testing.T) {
	stdout, stderr := engine.JobOutput(context.Background())
	if stdout != io.Writer(os.Stdout) || stderr != io.Writer(os.Stderr) {
		t.Errorf("JobOutput(Background) = %v, %v; want os.Stdout, os.Stderr", stdout, stderr)
	}
}
