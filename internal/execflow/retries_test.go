package execflow_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
)

// A job with retries runs again when its command fails, in every mode
// (serial, and worker processes), and passes on its third run; each
// failed run's error gives the command's exit status and standard error
// (FailureOf), and what it wrote of the outputs is gone before the next
// run (the command fails if it finds it). Options.Retries is the default
// of the jobs without retries; retries: 0 keeps a job from being retried.
func TestRetriesOfFailedCommands(t *testing.T) {
	for _, m := range modes[:2] {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range []string{"a", "b", "c"} {
				if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			// Run in sub-folder D, the command counts its runs, fails the
			// first two, and writes D/out.txt, which must be gone when it
			// runs again.
			cmd := func(d string) string {
				return `cd ` + d + ` && if [ -e out.txt ]; then echo left >&2; exit 9; fi; n=$(( $(cat count 2>/dev/null || echo 0) + 1 )); echo $n > count; echo partial > out.txt; echo "run $n" >&2; [ $n -gt 2 ]`
			}
			wf := parse(t, filepath.Join(dir, "wf.yaml"), `
jobs:
  - id: own
    run: '`+cmd("a")+`'
    outputs: [a/out.txt]
    retries: 2
  - id: default
    run: '`+cmd("b")+`'
    outputs: [b/out.txt]
  - id: never
    run: '`+cmd("c")+`'
    retries: 0
`)
			jobs, err := run(t, wf, m.workers, execflow.Options{Dir: dir, Retries: 1})
			if err == nil {
				t.Fatal("Run succeeded; want default and never to fail")
			}
			for id, want := range map[string]int{"own": 3, "default": 2, "never": 1} {
				as := jobs[id].Attempts()
				if len(as) != want {
					t.Errorf("%s: %d attempts, want %d", id, len(as), want)
					continue
				}
				for i, a := range as {
					if a.Status == engine.Succeeded {
						continue
					}
					f, ok := execflow.FailureOf(a.Err)
					if !ok || f.ExitCode != 1 || !strings.HasSuffix(f.StderrTail, "run "+string(rune('1'+i))) {
						t.Errorf("%s: attempt %d: %v: %+v, %v", id, i+1, a.Err, f, ok)
					}
				}
			}
			if st := jobs["own"].Status(); st != engine.Succeeded {
				t.Errorf("own: %v, want Succeeded on its third run", st)
			}
			if exists(filepath.Join(dir, "b", "out.txt")) {
				t.Error("b/out.txt is left after default failed")
			}
		})
	}
}

func TestFailureOfOthers(t *testing.T) {
	for _, err := range []error{
		&engine.TimeoutError{},
		&engine.RemoteError{Msg: `job "a" (wf.yaml:3): output x: the command exited 0 without making this output`},
		engine.ErrWorkerDied,
	} {
		if f, ok := execflow.FailureOf(err); ok {
			t.Errorf("FailureOf(%v) = %+v, true; want false", err, f)
		}
	}
}
