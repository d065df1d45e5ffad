package workflow_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/internal/workflow"
)

// Outputs that could name the same file, or a source, are refused with
// the lines of both.
func TestOverlappingOutputs(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"pattern over another job's path", `
jobs:
  - id: a
    run: x
    outputs: ["res-*.txt"]
  - id: b
    run: x
    outputs: [res-b.txt]
`, `wf.yaml:4: job "a": outputs "res-*.txt" can match outputs "res-b.txt" of job "b" (wf.yaml:7): a file may be the output of one job only`},
		{"two patterns", `
jobs:
  - id: a
    run: x
    outputs: ["out/*.txt"]
  - id: b
    run: x
    outputs: ["out/b-*"]
`, `wf.yaml:7: job "b": outputs "out/b-*" can match the same files as outputs "out/*.txt" of job "a" (wf.yaml:4): a file may be the output of one job only`},
		{"a path inside another's folder", `
jobs:
  - id: a
    run: x
    outputs: [out]
  - id: b
    run: x
    outputs: [out/b.txt]
`, `wf.yaml:7: job "b": outputs "out/b.txt" lies inside outputs "out" of job "a" (wf.yaml:4): a file may be the output of one job only`},
		{"a pattern inside another's folder", `
jobs:
  - id: a
    run: x
    outputs: [out]
  - id: b
    run: x
    outputs: ["out/*.txt"]
`, `wf.yaml:7: job "b": outputs "out/*.txt" can match files inside outputs "out" of job "a" (wf.yaml:4): a file may be the output of one job only`},
		{"a pattern over a source", `
jobs:
  - id: gen
    run: x
    outputs: ["src/*.c"]
  - id: build
    run: x
    inputs: [src/main.c]
`, `wf.yaml:4: job "gen": outputs "src/*.c" can match input "src/main.c" of job "build" (wf.yaml:5), a file that no job makes: a job's outputs may not include a source; if "build" reads what "gen" makes, write after: ["gen"]`},
		{"a pattern over its own input", `
jobs:
  - id: sort
    run: x
    inputs: [data.txt]
    outputs: ["*.txt"]
`, `wf.yaml:5: job "sort": outputs "*.txt" can match its own input "data.txt", a file that no job makes: a job's outputs may not include a source; name the files it makes instead`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := workflow.Parse("wf.yaml", yamlText(tt.in))
			if err == nil || err.Error() != tt.want {
				t.Errorf("error\n got: %v\nwant: %s", err, tt.want)
			}
		})
	}
}

// Outputs that cannot name one file are accepted, and so is a pattern
// over an input of a job that runs after the pattern's.
func TestDisjointOutputs(t *testing.T) {
	const text = `
jobs:
  - id: split
    run: x
    outputs: ["parts/a-*.txt", logs/split.log]
  - id: other
    run: x
    outputs: ["parts/b-*.txt", "logs/*.out"]
  - id: gen
    run: x
    outputs: ["src/*.c"]
  - id: build
    run: x
    inputs: [src/gen.c, parts/a-1.txt]
    outputs: [bin/app]
    after: [gen, split]
  - id: sub-${i}
    foreach: {i: 1..50}
    run: x
    outputs: ["sub/${i}/*"]
`
	if _, err := workflow.Parse("wf.yaml", yamlText(text)); err != nil {
		t.Fatal(err)
	}
}

// Claims finds the output that could name a file in a folder, the
// folder, or a folder above it.
func TestClaims(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "wf.yaml")
	const text = "jobs:\n  - id: a\n    run: x\n    outputs: [\"*.err\", out/a.txt, \"logs/*/x\", build]\n"
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := workflow.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dir   string
		names []string
		want  string
	}{
		{".", []string{"b.err"}, "*.err"},
		{".", []string{"b.out", "report.json"}, ""},
		{"logs", []string{"b.err"}, ""},
		{"out", []string{"a.txt"}, "out/a.txt"},
		{"out", []string{"b.txt"}, ""},
		{"out/a.txt", nil, "out/a.txt"},
		{"logs/j", []string{"x"}, "logs/*/x"},
		{"logs/j", []string{"y"}, ""},
		{"build/logs", []string{"y"}, "build"},
		{dir, []string{"x.err"}, "*.err"},
	}
	for _, tt := range tests {
		j, o := w.Claims(tt.dir, tt.names...)
		if o != tt.want || (j != nil) != (tt.want != "") {
			t.Errorf("Claims(%q, %q) = %v %q, want %q", tt.dir, tt.names, j, o, tt.want)
		}
	}
}

// An output whose folder leads out of the working folder through a
// symbolic link is refused; the link itself may be an output; the root
// cannot be the working folder.
func TestOutputsConfinedAfterLinks(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"wf/sub", "victim"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../victim", filepath.Join(root, "wf", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../..", filepath.Join(root, "wf", "sub", "up")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "wf", "wf.yaml")
	tests := []struct{ name, in, want string }{
		{"a pattern through a link", "jobs:\n  - id: a\n    run: x\n    outputs: [\"link/*\"]\n",
			`wf.yaml:4: job "a": outputs "link/*": its folder link is {ROOT}/victim once links are followed, outside the workflow's folder {ROOT}/wf: outputs must lie inside it`},
		{"a path through a link", "jobs:\n  - id: a\n    run: x\n    outputs: [link/new/x.txt]\n",
			`wf.yaml:4: job "a": outputs "link/new/x.txt": its folder link/new is {ROOT}/victim/new once links are followed, outside the workflow's folder {ROOT}/wf: outputs must lie inside it`},
		{"a link to the folder above", "jobs:\n  - id: a\n    run: x\n    outputs: [\"sub/up/*\"]\n",
			`wf.yaml:4: job "a": outputs "sub/up/*": its folder sub/up is {ROOT} once links are followed, outside the workflow's folder {ROOT}/wf: outputs must lie inside it`},
		{"the root as workdir", "workdir: /\njobs:\n  - id: a\n    run: x\n",
			"wf.yaml:1: workdir / is the root folder: outputs must lie inside the working folder, and a failed job's are removed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := workflow.Parse(file, []byte(tt.in))
			want := strings.ReplaceAll(tt.want, "{ROOT}", root)
			if err == nil || !strings.HasSuffix(err.Error(), want) {
				t.Errorf("error\n got: %v\nwant: %s", err, want)
			}
		})
	}
	if _, err := workflow.Parse(file, []byte("jobs:\n  - id: a\n    run: ln -s ../victim link\n    outputs: [link, sub/x]\n")); err != nil {
		t.Errorf("a link as the output itself: %v", err)
	}
}
