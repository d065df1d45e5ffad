package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPythonExample runs examples/python as a user does, in its folder
// of a copy of the repository's examples and python folders: the worker
// program's run scores every input, --report names the program and its
// item, a second run is up to date, and the same jobs as plain commands
// give the same outputs.
func TestPythonExample(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: examples/python is not run")
	}
	root := t.TempDir()
	for _, d := range []string{filepath.Join("examples", "python"), "python"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		files, err := filepath.Glob(filepath.Join("..", "..", d, "*.*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if !strings.HasSuffix(f, ".py") && !strings.HasSuffix(f, ".yaml") {
				continue
			}
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, d, filepath.Base(f)), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir := filepath.Join(root, "examples", "python")
	r := poolrun(t, dir, "run", "-j", "2", "--set", "n=6", "--report", "r.html", "score.yaml")
	if r.code != 0 {
		t.Fatalf("score.yaml: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := line(r.stderr, "7 jobs:"); !strings.HasPrefix(got, "7 succeeded;") {
		t.Errorf("score.yaml's account: %q\n%s", got, r.stderr)
	}
	page, err := os.ReadFile(filepath.Join(dir, "r.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"poolrun.worker:score@", "poolrun.item:reference@"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the report does not name %s", want)
		}
	}
	scored := map[string]string{}
	for i := range 6 {
		name := filepath.Join("out", string(rune('1'+i))+".txt")
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		scored[name] = string(data)
	}
	if r := poolrun(t, dir, "run", "-j", "2", "--set", "n=6", "score.yaml"); r.code != 0 || !strings.Contains(r.stderr, "7 skipped (up to date)") {
		t.Errorf("the second run: exit %d, want everything up to date\n%s", r.code, r.stderr)
	}
	if err := os.RemoveAll(filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if r := poolrun(t, dir, "run", "-j", "2", "--set", "n=6", "commands.yaml"); r.code != 0 {
		t.Fatalf("commands.yaml: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for name, want := range scored {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != want {
			t.Errorf("%s as a command: %q, %v; as a worker program's job: %q", name, got, err, want)
		}
	}
}

// TestClusterProgram: the jobs of a worker program run on a worker that
// joined the pool (poolrun worker): the agent's worker starts the
// program, which maps the window of its host, holds its item and frees
// it there as a local one does, and ends with the pool.
func TestClusterProgram(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the Python worker program is not run")
	}
	dir := t.TempDir()
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	log := filepath.Join(dir, "prog.log")
	wf := fmt.Sprintf(`workers:
  py:
    run: python3 %s
    env: {PROG_LOG: %q, PYTHONPATH: %q}
items:
  first: {worker: py}
  second: {worker: py}
jobs:
  - {id: a, worker: py, args: [first], needs: [first]}
  - {id: b, worker: py, args: [second], needs: [second], after: [a]}
`, abs("../../internal/execflow/testdata/items_worker.py"), log, abs("../../python"))
	if err := os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(wf), 0o644); err != nil {
		t.Fatal(err)
	}
	pool, out := startPoolrun(t, dir, nil, "run", "-j", "0", "--listen", "127.0.0.1:0", "--join-file", "run.join", "--tag", "wf.yaml")
	waitJoinFile(t, filepath.Join(dir, "run.join"), out)
	if w := poolrun(t, dir, "worker", "--join-file", "run.join", "-j", "1"); w.code != 0 {
		t.Errorf("poolrun worker: exit %d\n%s%s", w.code, w.stdout, w.stderr)
	}
	if err := pool.Wait(); err != nil {
		t.Fatalf("the pool: %v\n%s", err, out)
	}
	for _, want := range []string{"[a] done first", "[b] done second"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the pool's output lacks %q:\n%s", want, out)
		}
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var starts, ends int
	freed, second := -1, -1 // lines
	for i, l := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(l, "start "):
			starts++
		case strings.HasPrefix(l, "free ") && strings.HasSuffix(l, " first"):
			freed = i
		case strings.HasPrefix(l, "req ") && strings.HasSuffix(l, " second"):
			second = i
		case strings.HasPrefix(l, "end "):
			ends++
		}
	}
	// first is freed before b's request: the window of the agent's host
	// no longer lists it.
	if starts != 1 || ends != 1 || freed < 0 || second < 0 || freed > second {
		t.Errorf("the program's log, want one program that frees first before b's request and ends:\n%s", data)
	}
}
