package workflow_test

import (
	"errors"
	"testing"

	"github.com/poolrun/poolrun/internal/workflow"
)

// FuzzParse checks that Parse never panics, that every error it returns is
// a *workflow.Error with a line, and that every workflow it returns keeps
// the promises of its documentation. The corpus in testdata/fuzz/FuzzParse
// holds the examples, YAML errors, timeouts, and aliases that stand for a
// billion values ("billion_laughs_*") or repeat jobs and lists
// ("alias_*"); TestAliasBombs measures the memory such files take.
func FuzzParse(f *testing.F) {
	f.Add([]byte("jobs:\n  - {id: a, run: x}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := workflow.Parse("f.yaml", data)
		if err != nil {
			var werr *workflow.Error
			if !errors.As(err, &werr) || werr.File != "f.yaml" || werr.Line < 1 || werr.Msg == "" {
				t.Fatalf("error %#v is not a *workflow.Error with a line", err)
			}
			return
		}
		if len(w.Jobs) == 0 || len(w.Jobs) > workflow.MaxJobs {
			t.Fatalf("%d jobs", len(w.Jobs))
		}
		done := make(map[string]bool, len(w.Jobs))
		for _, j := range w.Jobs {
			if j.ID == "" || j.Run == "" || done[j.ID] || j.Timeout < 0 {
				t.Fatalf("job %+v: empty id or run, a repeated id or a negative timeout", j)
			}
			for _, a := range j.After {
				if !done[a] {
					t.Fatalf("job %q runs after %q, which does not come before it", j.ID, a)
				}
			}
			for _, n := range j.Needs {
				if w.ItemByName(n) == nil {
					t.Fatalf("job %q needs unknown item %q", j.ID, n)
				}
			}
			done[j.ID] = true
		}
		env := make(map[string]bool, len(w.Items))
		for _, it := range w.Items {
			if e := workflow.EnvName(it.Name); env[e] {
				t.Fatalf("two items with variable %s", e)
			} else {
				env[e] = true
			}
		}
	})
}
