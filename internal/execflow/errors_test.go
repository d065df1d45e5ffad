package execflow_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
)

const failFlow = `
items:
  bad:
    run: |
      echo "cannot build" >&2
      exit 4
  none:
    run: "true"
  good:
    run: echo ok > "$POOLRUN_ITEM"
jobs:
  - id: fail
    run: |
      i=1
      while [ $i -le 30 ]; do echo "line $i" >&2; i=$((i + 1)); done
      exit 3
  - id: after-fail
    after: [fail]
    run: "true"
  - id: killed
    run: kill -KILL $$
  - id: needs-bad
    needs: [good, bad]
    run: "true"
  - id: needs-none
    needs: [none]
    run: "true"
  - id: fine
    needs: [good]
    run: echo "a warning" >&2
`

// TestFailures checks the errors of commands that fail: a job's command
// that exits non-zero or is killed, an item's command that fails or builds
// nothing. The jobs that depend on a failed job are cancelled; the others
// run.
func TestFailures(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			wf := parse(t, "fail.yaml", failFlow)
			root := t.TempDir()
			jobs, runErr := run(t, wf, m.workers, execflow.Options{Dir: t.TempDir(), Scratch: root, TailLines: 5})
			if runErr == nil {
				t.Fatal("Run succeeded")
			}
			line := func(id string) int {
				for _, j := range wf.Jobs {
					if j.ID == id {
						return j.Line
					}
				}
				t.Fatalf("no job %s", id)
				return 0
			}

			cases := []struct {
				name string
				job  string
				want execflow.CommandError
			}{
				{"exit status", "fail", execflow.CommandError{
					JobID: "fail", File: "fail.yaml", Line: line("fail"), ExitCode: 3,
					StderrTail: "line 26\nline 27\nline 28\nline 29\nline 30",
				}},
				{"signal", "killed", execflow.CommandError{
					JobID: "killed", File: "fail.yaml", Line: line("killed"), ExitCode: -1, Signal: "SIGKILL",
				}},
				{"item", "needs-bad", execflow.CommandError{
					JobID: "needs-bad", Item: "bad", File: "fail.yaml", Line: wf.ItemByName("bad").Line, ExitCode: 4,
					StderrTail: "cannot build",
				}},
			}
			for _, c := range cases {
				j := jobs[c.job]
				if j.Status() != engine.Failed {
					t.Errorf("%s: job %s is %v, want failed", c.name, c.job, j.Status())
					continue
				}
				_, err := j.Result()
				ce, ok := execflow.AsCommandError(err)
				if !ok {
					t.Errorf("%s: no CommandError in %v", c.name, err)
					continue
				}
				if *ce != c.want {
					t.Errorf("%s: got\n%#v\nwant\n%#v", c.name, *ce, c.want)
				}
				var je *engine.JobError
				if !errors.As(runErr, &je) {
					t.Errorf("Run's error holds no JobError: %v", runErr)
				}
				if !strings.Contains(runErr.Error(), c.want.Error()) {
					t.Errorf("%s: Run's error does not say %q:\n%v", c.name, c.want.Error(), runErr)
				}
			}

			if st := jobs["after-fail"].Status(); st != engine.Cancelled {
				t.Errorf("after-fail is %v, want cancelled", st)
			}
			_, err := jobs["needs-none"].Result()
			want := fmt.Sprintf(`job "needs-none": item "none" (fail.yaml:%d): %v`, wf.ItemByName("none").Line, execflow.ErrNoArtefact)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("needs-none: %v, want it to say %q", err, want)
			}
			if _, ok := execflow.AsCommandError(err); ok {
				t.Errorf("needs-none: a CommandError: %v", err)
			}
			res, err := jobs["fine"].Result()
			if err != nil || res.Stderr != "a warning" || res.ExitCode != 0 {
				t.Errorf("fine: %+v, %v", res, err)
			}
			if left := scratchLeft(t, root); len(left) > 0 {
				t.Errorf("scratch root holds %q after the run", left)
			}
			t.Logf("Run: %v", runErr)
		})
	}
}
