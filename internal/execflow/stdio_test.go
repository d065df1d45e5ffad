package execflow_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/workflow"
)

// printWorkflow has two jobs, one with a '/' in its id, that print 200
// lines on standard output and 200 on standard error, each line in two
// writes, and end with an unfinished line on each.
const printWorkflow = `
jobs:
  - id: ${j}
    foreach: {j: [a, b/c]}
    run: |
      for i in $(seq 1 200); do printf 'out '; printf '%d\n' $i; printf 'err ' >&2; printf '%d\n' $i >&2; done
      printf 'last out'; printf 'last err' >&2
`

// syncBuffer is a strings.Builder safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runPrinting runs wf on a pool of the given size whose workers' output
// goes to stdout and stderr.
func runPrinting(t *testing.T, wf *workflow.Workflow, workers int, opts execflow.Options, stdout, stderr *syncBuffer) (map[string]*engine.Job[execflow.Result], error) {
	t.Helper()
	p := engine.New(engine.Workers(workers), engine.WorkerOutput(stdout, stderr))
	jobs, err := execflow.Queue(p, wf, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	err = p.Run(ctx)
	if ctx.Err() != nil {
		t.Fatalf("the pool did not finish in %v: %v", runTimeout, err)
	}
	return jobs, err
}

// wantPrinted is what a job of printWorkflow prints on one stream
// ("out" or "err"), each line prefixed with tag.
func wantPrinted(tag, what string) []string {
	var lines []string
	for i := 1; i <= 200; i++ {
		lines = append(lines, fmt.Sprintf("%s%s %d", tag, what, i))
	}
	return append(lines, tag+"last "+what)
}

// TestTag: with Stdio.Tag, every line a job's command prints, on standard
// output and error, is whole and begins with the job's id in brackets,
// its unfinished last line included (ended with a newline).
func TestTag(t *testing.T) {
	wf := parse(t, "print.yaml", printWorkflow)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			var stdout, stderr syncBuffer
			if _, err := runPrinting(t, wf, m.workers, execflow.Options{Stdio: execflow.Stdio{Tag: true}}, &stdout, &stderr); err != nil {
				t.Fatal(err)
			}
			for _, s := range []struct {
				what string
				got  string
			}{{"out", stdout.String()}, {"err", stderr.String()}} {
				if !strings.HasSuffix(s.got, "\n") {
					t.Errorf("%s does not end with a newline: %q", s.what, s.got[max(len(s.got)-40, 0):])
				}
				byJob := map[string][]string{}
				for _, line := range strings.Split(strings.TrimSuffix(s.got, "\n"), "\n") {
					id, _, ok := strings.Cut(line, "] ")
					if !ok || !strings.HasPrefix(id, "[") {
						t.Fatalf("%s: line %q has no tag", s.what, line)
					}
					byJob[id[1:]] = append(byJob[id[1:]], line)
				}
				for _, id := range []string{"a", "b/c"} {
					want := wantPrinted("["+id+"] ", s.what)
					if got := byJob[id]; strings.Join(got, "\n") != strings.Join(want, "\n") {
						t.Errorf("%s of job %s: %d lines, want %d:\n%s", s.what, id, len(got), len(want), strings.Join(got, "\n"))
					}
				}
				if len(byJob) != 2 {
					t.Errorf("%s: lines of jobs %v, want a and b/c", s.what, sortedKeys(byJob))
				}
			}
		})
	}
}

// TestUntagged: without Stdio.Tag, a command's output passes on byte for
// byte, its unfinished last line as it is.
func TestUntagged(t *testing.T) {
	wf := parse(t, "print.yaml", strings.Replace(printWorkflow, "[a, b/c]", "[a]", 1))
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			var stdout, stderr syncBuffer
			if _, err := runPrinting(t, wf, m.workers, execflow.Options{}, &stdout, &stderr); err != nil {
				t.Fatal(err)
			}
			for _, s := range []struct {
				what string
				got  string
			}{{"out", stdout.String()}, {"err", stderr.String()}} {
				want := wantPrinted("", s.what)
				if w := strings.Join(want[:200], "\n") + "\n" + want[200]; s.got != w {
					t.Errorf("%s: got %d bytes, want %d: %q", s.what, len(s.got), len(w), s.got[max(len(s.got)-40, 0):])
				}
			}
		})
	}
}

// TestLogDir: with Stdio.LogDir, each job's standard output and error go
// to files of their own, named after the job (its '/' escaped), with mode
// 0666 less the umask; nothing is passed on, and the job's result still
// holds the end of its standard error.
func TestLogDir(t *testing.T) {
	wf := parse(t, "print.yaml", printWorkflow)
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			// What an earlier run left is replaced.
			os.WriteFile(filepath.Join(dir, "a.out"), []byte(strings.Repeat("stale\n", 1000)), 0o644)
			var stdout, stderr syncBuffer
			jobs, err := runPrinting(t, wf, m.workers, execflow.Options{Stdio: execflow.Stdio{Tag: true, LogDir: dir}}, &stdout, &stderr)
			if err != nil {
				t.Fatal(err)
			}
			if stdout.String() != "" || stderr.String() != "" {
				t.Errorf("output passed on: stdout %q, stderr %q", stdout.String(), stderr.String())
			}
			for _, id := range []string{"a", "b/c"} {
				for _, what := range []string{"out", "err"} {
					path := filepath.Join(dir, execflow.LogName(id)+"."+what)
					data, err := os.ReadFile(path)
					if err != nil {
						t.Fatal(err)
					}
					want := wantPrinted("", what)
					if w := strings.Join(want[:200], "\n") + "\n" + want[200]; string(data) != w {
						t.Errorf("%s: %d bytes, want %d", path, len(data), len(w))
					}
					if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
						t.Errorf("%s: mode %v, %v; want 0640 (umask 027)", path, fi.Mode().Perm(), err)
					}
				}
				res, err := jobs[id].Result()
				if err != nil || !strings.HasSuffix(res.Stderr, "err 200\nlast err") {
					t.Errorf("job %s: result %+v, %v; want the tail of its stderr", id, res, err)
				}
			}
			entries, _ := os.ReadDir(dir)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if strings.Join(names, " ") != "a.err a.out b%2Fc.err b%2Fc.out" {
				t.Errorf("log folder holds %v", names)
			}
		})
	}
}

// TestLogDirLinkRefused: a symbolic link where a job's log file would go
// fails the job, with an error that names the path; its target is left
// alone and the command does not run.
func TestLogDirLinkRefused(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			dir, work := t.TempDir(), t.TempDir()
			target := filepath.Join(work, "precious")
			os.WriteFile(target, []byte("keep me\n"), 0o644)
			link := filepath.Join(dir, "a.err")
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			wf := parse(t, "link.yaml", "jobs:\n  - id: a\n    run: echo ran > ran; echo oops >&2\n")
			jobs, err := run(t, wf, m.workers, execflow.Options{Dir: work, Stdio: execflow.Stdio{LogDir: dir}})
			if err == nil {
				t.Fatal("Run succeeded")
			}
			if _, err := jobs["a"].Result(); err == nil || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), "symbolic link") {
				t.Errorf("the job's error is %v, want one that names %s as a link", err, link)
			}
			if data, _ := os.ReadFile(target); string(data) != "keep me\n" {
				t.Errorf("the link's target holds %q", data)
			}
			if _, err := os.Stat(filepath.Join(work, "ran")); err == nil {
				t.Error("the command ran")
			}
		})
	}
}

// TestLogDirMustExist: Queue refuses a log folder that does not exist, or
// is not a folder, and queues nothing.
func TestLogDirMustExist(t *testing.T) {
	wf := parse(t, "print.yaml", printWorkflow)
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	for _, dir := range []string{filepath.Join(t.TempDir(), "missing"), file} {
		p := engine.New(engine.Workers(0))
		if _, err := execflow.Queue(p, wf, execflow.Options{Stdio: execflow.Stdio{LogDir: dir}}); err == nil || !strings.Contains(err.Error(), dir) {
			t.Errorf("Queue with log folder %s: %v, want an error that names it", dir, err)
		}
		if n := p.Stats().Counts; n != [len(n)]int{} {
			t.Errorf("Queue queued jobs: %v", n)
		}
	}
}
