package workflow_test

import (
	"strings"
	"testing"

	"github.com/poolrun/poolrun/internal/workflow"
)

// An entry's desc and its id as written reach each of its jobs, ${...}
// left as written; a desc that is not a string is an error, FILE:LINE.
func TestParseDesc(t *testing.T) {
	wf, err := workflow.Parse("wf.yaml", []byte(`
vars: {ref: hg38}
jobs:
  - id: align-${i}-${ref}
    foreach: {i: 1..2}
    run: x
    desc: align part ${i}
  - id: merge
    run: x
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range wf.Jobs[:2] {
		if j.EntryID != "align-${i}-${ref}" || j.Desc != "align part ${i}" {
			t.Errorf("%s: entry id %q, desc %q", j.ID, j.EntryID, j.Desc)
		}
	}
	if m := wf.Jobs[2]; m.EntryID != "merge" || m.Desc != "" {
		t.Errorf("merge: entry id %q, desc %q; want merge and none", m.EntryID, m.Desc)
	}
	_, err = workflow.Parse("wf.yaml", []byte("jobs:\n  - id: a\n    run: x\n    desc: [a, b]\n"))
	if want := `wf.yaml:4: job "a": desc must be a string, not a list`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a desc that is a list: %v, want %q", err, want)
	}
}
