package workflow_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/poolrun/poolrun/internal/workflow"
)

func TestGlob(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.txt", ".hidden.txt", "sub/b.txt", "sub/.c.txt", ".git/config", "d.x/e.txt"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		pattern string
		want    []string
	}{
		{"*", []string{"a.txt", "d.x", "sub"}},
		{"*.txt", []string{"a.txt"}},
		{".*", []string{".git", ".hidden.txt"}},
		{"*/*", []string{"d.x/e.txt", "sub/b.txt"}},
		{"*/.*", []string{"sub/.c.txt"}},
		{"sub/*.txt", []string{"sub/b.txt"}},
		{"./sub//b.txt", []string{"sub/b.txt"}},
		{"a.txt/*", nil}, // a file is no folder
		{"missing/*", nil},
		{"a.txt", []string{"a.txt"}},
		{"[", nil},
	}
	for _, tt := range tests {
		var got []string
		for _, m := range workflow.Glob(filepath.Join(dir, tt.pattern)) {
			rel, err := filepath.Rel(dir, m)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, rel)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Glob(%q) = %q, want %q", tt.pattern, got, tt.want)
		}
	}
}

func TestOutputInsideByAbsolutePath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "wf.yaml")
	w, err := workflow.Parse(file, yamlText(`
jobs:
  - id: a
    run: x
    outputs: ["`+filepath.Join(dir, "out", "a.txt")+`", "sub/../b.txt"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Jobs[0].Outputs; len(got) != 2 {
		t.Errorf("outputs %q, want both", got)
	}
}

func TestOwnFiles(t *testing.T) {
	if got, want := workflow.StateFile("wf/jobs.yaml"), "wf/.jobs.yaml.poolrun-state"; got != want {
		t.Errorf("StateFile = %q, want %q", got, want)
	}
	if got, want := workflow.LockFile("jobs.yaml"), ".jobs.yaml.poolrun-lock"; got != want {
		t.Errorf("LockFile = %q, want %q", got, want)
	}
}
