package cli

import (
	"path/filepath"

	"github.com/poolrun/poolrun/internal/workflow"
)

// checkClaims refuses, before anything runs, a run whose jobs' outputs
// could name one of poolrun's own files, given by their flags: a failed
// job's outputs are removed, and a job's outputs count as made by it.
func checkClaims(wf *workflow.Workflow, own map[string]string) error {
	for _, flag := range []string{"--report", "--join-file"} {
		path := own[flag]
		if path == "" {
			continue
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			continue // refused where it is written
		}
		if j, o := wf.Claims(filepath.Dir(abs), filepath.Base(abs)); j != nil {
			return badInputf("poolrun run: %s %s: %s:%d: job %q: outputs %q can match it: a file of poolrun's is no job's output", flag, path, wf.File, j.Line, j.ID, o)
		}
	}
	return nil
}
