package cluster_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/proctest"
)

// printArg is what a job of printLines prints: Lines numbered lines on
// its standard output and on its standard error, each Pad bytes long,
// given to JobOutput's writers Batch lines at a time; after each batch
// on standard output it writes how many bytes it has printed there to
// the file Count, if not "". Then it prints Partial without a newline,
// and with Die its worker process exits at once (remote workers only).
type printArg struct {
	Name         string
	Lines, Batch int
	Pad          int
	Count        string
	Partial      string
	Die          bool
}

// printedLine is line i of job name's stream ("out" or "err"), with its
// newline, padded to pad bytes.
func printedLine(name, stream string, i, pad int) string {
	s := fmt.Sprintf("%s %s %07d ", name, stream, i)
	if n := pad - len(s) - 1; n > 0 {
		s += strings.Repeat("x", n)
	}
	return s + "\n"
}

var printLines = engine.Register("cluster_test.print-lines", func(ctx context.Context, a printArg) (int, error) {
	stdout, stderr := engine.JobOutput(ctx)
	batch := max(a.Batch, 1)
	printed := 0
	var out, errb bytes.Buffer
	for i := 0; i < a.Lines; {
		out.Reset()
		errb.Reset()
		for k := 0; k < batch && i < a.Lines; k, i = k+1, i+1 {
			out.WriteString(printedLine(a.Name, "out", i, a.Pad))
			errb.WriteString(printedLine(a.Name, "err", i, a.Pad))
		}
		n, err := stdout.Write(out.Bytes())
		printed += n
		if err != nil {
			return printed, err
		}
		if _, err := stderr.Write(errb.Bytes()); err != nil {
			return printed, err
		}
		if a.Count != "" {
			os.WriteFile(a.Count, []byte(strconv.Itoa(printed)), 0o644)
		}
	}
	if a.Partial != "" {
		stdout.Write([]byte(a.Partial))
	}
	if a.Die && os.Getenv(envAgent) != "" {
		os.Exit(3)
	}
	return printed, nil
})

// startOutputAgent starts a host agent of two worker processes (the test
// binary) for the pool of joinFile; what the agent's process prints goes
// to out.
func startOutputAgent(t *testing.T, joinFile string) (*exec.Cmd, *proctest.Buffer) {
	t.Helper()
	out := new(proctest.Buffer)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envAgent+"="+joinFile)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, out
}

// checkLines checks that s, what the pool printed of stream, holds the
// lines of each job of jobs, whole, each once and in order, and nothing
// else.
func checkLines(t *testing.T, s, stream string, jobs []printArg) {
	t.Helper()
	next := map[string]int{}
	pads := map[string]int{}
	for _, a := range jobs {
		pads[a.Name] = a.Pad
	}
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	bad := 0
	for sc.Scan() {
		l := sc.Text()
		name, _, _ := strings.Cut(l, " ")
		pad, ok := pads[name]
		if ok && l+"\n" == printedLine(name, stream, next[name], pad) {
			next[name]++
			continue
		}
		if bad++; bad <= 3 {
			t.Errorf("%s: line %.120q is no job's next whole line (%s is at line %d)", stream, l, name, next[name])
		}
	}
	for _, a := range jobs {
		if next[a.Name] != a.Lines {
			t.Errorf("%s: %d of the %d lines of %s reached the pool", stream, next[a.Name], a.Lines, a.Name)
		}
	}
}

// TestRemoteOutput: what jobs on a host agent's workers print reaches
// the pool's WorkerOutput writers, standard output and error apart, in
// whole lines (six jobs print at once on two workers), each job's lines
// in order; the agent's own output holds none of it.
func TestRemoteOutput(t *testing.T) {
	joinFile := filepath.Join(t.TempDir(), "run.join")
	l, err := listen("", joinFile)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	agent, agentOut := startOutputAgent(t, joinFile)
	var stdout, stderr proctest.Buffer
	p := engine.New(engine.RemoteOnly(time.Minute), l.Option(), engine.WorkerOutput(&stdout, &stderr))
	var args []printArg
	for i := range 6 {
		a := printArg{Name: fmt.Sprintf("job%d", i), Lines: 300, Batch: 7, Pad: 40 + 900*i}
		args = append(args, a)
		engine.Queue(p, printLines, a)
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkLines(t, stdout.String(), "out", args)
	checkLines(t, stderr.String(), "err", args)
	if err := agent.Wait(); err != nil {
		t.Errorf("the agent: %v", err)
	}
	if s := agentOut.String(); strings.Contains(s, "job0 ") {
		t.Errorf("the agent printed its jobs' output:\n%.500s", s)
	}
}

// TestRemoteOutputWorkerDies: a remote worker process that dies after its
// job printed part of a line loses none of what it printed: the pool has
// the whole lines and the part.
func TestRemoteOutputWorkerDies(t *testing.T) {
	joinFile := filepath.Join(t.TempDir(), "run.join")
	l, err := listen("", joinFile)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	startOutputAgent(t, joinFile)
	var stdout, stderr proctest.Buffer
	p := engine.New(engine.RemoteOnly(time.Minute), l.Option(), engine.WorkerOutput(&stdout, &stderr))
	a := printArg{Name: "dying", Lines: 50, Pad: 30, Partial: "the last words, unfinished", Die: true}
	engine.Queue(p, printLines, a)
	if err := p.Run(context.Background()); !errors.Is(err, engine.ErrWorkerDied) {
		t.Errorf("Run: %v, want the job's worker dead", err)
	}
	out, ok := strings.CutSuffix(stdout.String(), a.Partial)
	if !ok {
		t.Errorf("the pool's stdout does not end with the unfinished line %q:\n%.300q", a.Partial, stdout.String())
	}
	a.Partial = ""
	checkLines(t, out, "out", []printArg{a})
	checkLines(t, stderr.String(), "err", []printArg{a})
}

// gatedWriter holds every Write until open is closed, then keeps what
// it is given.
type gatedWriter struct {
	open    chan struct{}
	entered chan struct{} // closed at the first Write
	once    sync.Once
	buf     proctest.Buffer
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.entered) })
	<-w.open
	return w.buf.Write(p)
}

// TestRemoteOutputBounded: jobs on a remote host that print far more
// than the pool takes wait for it, as over a pipe: while the pool's
// output writer is held, neither job gets more than a few MiB ahead of
// it (the output credit of a worker is 1 MiB; the pipes and line buffers
// on the way hold a few hundred KiB more), so the pool's memory does not
// grow with what a job prints; once it is let go, every line arrives,
// whole and in order. The jobs print 12 MiB each (6 MiB with -short or
// -race).
func TestRemoteOutputBounded(t *testing.T) {
	t.Parallel()
	total := 12 << 20
	if testing.Short() || raceEnabled {
		total = 6 << 20
	}
	const ahead = 4 << 20 // the most a job may print beyond what the pool took
	const pad = 100
	dir := t.TempDir()
	joinFile := filepath.Join(dir, "run.join")
	l, err := listen("", joinFile)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	startOutputAgent(t, joinFile)
	stdout := &gatedWriter{open: make(chan struct{}), entered: make(chan struct{})}
	var stderr proctest.Buffer
	p := engine.New(engine.RemoteOnly(time.Minute), l.Option(), engine.WorkerOutput(stdout, &stderr))
	var args []printArg
	for i := range 2 {
		a := printArg{Name: fmt.Sprintf("big%d", i), Lines: total / pad, Batch: 600, Pad: pad, Count: filepath.Join(dir, fmt.Sprintf("count%d", i))}
		args = append(args, a)
		engine.Queue(p, printLines, a)
	}
	printed := func(a printArg) int {
		b, _ := os.ReadFile(a.Count)
		n, _ := strconv.Atoi(string(b))
		return n
	}
	var let time.Time
	p.Go(func(ctx context.Context) error {
		defer func() {
			let = time.Now()
			close(stdout.open)
		}()
		select {
		case <-stdout.entered:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Minute):
			return errors.New("no output reached the pool in a minute")
		}
		// The writer is held: the jobs print on until they wait for it.
		// Watch them for a while (long enough to print it all on any
		// machine, were nothing to hold them): they must stay within
		// ahead of the pool.
		most := 0
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			for _, a := range args {
				most = max(most, printed(a))
			}
			if most > ahead {
				return fmt.Errorf("a job printed %d bytes while the pool had taken none, want at most %d", most, ahead)
			}
		}
		t.Logf("the jobs printed at most %d KiB each while the pool's writer was held", most>>10)
		return nil
	})
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("the pool took %d MiB of output in %v once let go", 2*total>>20, time.Since(let).Round(time.Millisecond))
	checkLines(t, stdout.buf.String(), "out", args)
	checkLines(t, stderr.String(), "err", args)
}
