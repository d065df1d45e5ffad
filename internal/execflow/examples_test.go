package execflow_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/workflow"
)

// TestExamples runs every workflow of the repository's examples folder, with
// two workers and serially, each copied into a fresh working folder: every
// job must succeed and no scratch folder may remain.
func TestExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the examples' commands")
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no examples/*.yaml")
	}
	for _, file := range files {
		if strings.HasPrefix(filepath.Base(file), "scaffold-") {
			continue // a scaffold configuration, not a workflow
		}
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		for _, workers := range []int{2, 0} {
			mode := "2 workers"
			if workers == 0 {
				mode = "serial"
			}
			t.Run(name+"/"+mode, func(t *testing.T) {
				// A copy in the working folder: inputs and outputs are
				// relative to the workflow's folder.
				dir, root := t.TempDir(), t.TempDir()
				data, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				copied := filepath.Join(dir, filepath.Base(file))
				if err := os.WriteFile(copied, data, 0o644); err != nil {
					t.Fatal(err)
				}
				wf, err := workflow.Load(copied)
				if err != nil {
					t.Fatal(err)
				}
				jobs, err := run(t, wf, workers, execflow.Options{Dir: dir, Scratch: root})
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if len(jobs) != len(wf.Jobs) {
					t.Errorf("%d jobs queued, want %d", len(jobs), len(wf.Jobs))
				}
				for _, id := range sortedKeys(jobs) {
					j := jobs[id]
					if res, err := j.Result(); j.Status() != engine.Succeeded || err != nil {
						t.Errorf("job %s: %v, %v", id, j.Status(), err)
					} else if res.ExitCode != 0 {
						t.Errorf("job %s: exit code %d", id, res.ExitCode)
					}
				}
				if left := scratchLeft(t, root); len(left) > 0 {
					t.Errorf("scratch root holds %q after the run", left)
				}
				want := []string{filepath.Base(file), "poolrun-example-" + name}
				slices.Sort(want)
				if got := scratchLeft(t, dir); !slices.Equal(got, want) {
					t.Errorf("working folder holds %q, want only %q", got, want)
				}
			})
		}
	}
}
