package main_test

import (
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
