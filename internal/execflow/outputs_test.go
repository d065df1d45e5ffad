package execflow_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
)

// exists reports whether something is at path (a symbolic link counts).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// A job's worker checks its outputs after a command that exits 0, and
// removes them when the job fails: its command failed, or an output was
// not written.
func TestOutputsCheckedAndRemoved(t *testing.T) {
	const text = `
jobs:
  - id: fails
    run: mkdir -p out/dir && echo x > out/dir/f && echo half > out/fails.txt && echo y > out/fails-1.part; exit 3
    outputs: [out/fails.txt, out/dir, "out/fails-*.part"]
  - id: lazy
    run: "true"
    outputs: [out/lazy.txt]
  - id: stale
    run: test -f out/stale.txt
    outputs: [out/stale.txt]
  - id: nomatch
    run: touch out/other.txt
    outputs: ["out/none-*.txt"]
  - id: folder
    run: touch out/existing/inside.txt
    outputs: [out/existing]
  - id: good
    run: echo ok > out/good.txt; echo ok > out/good-1.part
    outputs: [out/good.txt, "out/good-*.part"]
  - id: rewritten
    run: echo new > out/rewritten.txt
    outputs: [out/rewritten.txt]
`
	for _, m := range modes[:2] {
		t.Run(m.name, func(t *testing.T) {
			dir, scratch := t.TempDir(), t.TempDir()
			out := filepath.Join(dir, "out")
			if err := os.MkdirAll(filepath.Join(out, "existing"), 0o755); err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-time.Hour)
			for _, name := range []string{"stale.txt", "rewritten.txt", "fails.txt"} {
				if err := os.WriteFile(filepath.Join(out, name), []byte("old\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				os.Chtimes(filepath.Join(out, name), old, old)
			}
			file := filepath.Join(dir, "wf.yaml")
			wf := parse(t, file, text)
			jobs, _ := run(t, wf, m.workers, execflow.Options{Dir: dir, Scratch: scratch})

			wantErr := map[string]string{
				"fails":   `job "fails" (` + file + `:3): exit status 3`,
				"lazy":    `job "lazy" (` + file + `:6): output ` + filepath.Join(out, "lazy.txt") + `: the command exited 0 without writing this output`,
				"stale":   `job "stale" (` + file + `:9): output ` + filepath.Join(out, "stale.txt") + `: the command exited 0 without writing this output (it is as it was before the command ran)`,
				"nomatch": `job "nomatch" (` + file + `:12): output ` + filepath.Join(out, "none-*.txt") + `: the command exited 0 without writing this output (nothing matches the pattern)`,
			}
			for _, id := range sortedKeys(jobs) {
				_, err := jobs[id].Result()
				want, fails := wantErr[id]
				switch {
				case !fails && jobs[id].Status() != engine.Succeeded:
					t.Errorf("job %s: %s (%v), want succeeded", id, jobs[id].Status(), err)
				case fails && (jobs[id].Status() != engine.Failed || err == nil || !strings.HasPrefix(err.Error(), want)):
					t.Errorf("job %s: %s, error %v; want failed with %s", id, jobs[id].Status(), err, want)
				}
			}
			for _, gone := range []string{"fails.txt", "dir", "fails-1.part", "lazy.txt", "stale.txt"} {
				if exists(filepath.Join(out, gone)) {
					t.Errorf("out/%s is still there", gone)
				}
			}
			for _, kept := range []string{"good.txt", "good-1.part", "rewritten.txt", "existing/inside.txt", "other.txt"} {
				if !exists(filepath.Join(out, kept)) {
					t.Errorf("out/%s is gone", kept)
				}
			}
		})
	}
}

// A failed job's outputs never take the workflow file, its state file, the
// commands' working folder or a folder above one of them along.
func TestOutputsRemovalSparesTheWorkflow(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "flow")
	work := filepath.Join(dir, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "wf.yaml")
	text := "jobs:\n  - {id: greedy, run: 'exit 1', outputs: ['*', '.*', '../*']}\n"
	for _, name := range []string{file, execflow.StateFile(file), filepath.Join(dir, "other.txt"), filepath.Join(work, "keep.txt"), filepath.Join(root, "sibling.txt")} {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wf := parse(t, file, text)
	jobs, _ := run(t, wf, 0, execflow.Options{Dir: work, Scratch: t.TempDir()})
	if st := jobs["greedy"].Status(); st != engine.Failed {
		t.Fatalf("job: %s, want failed", st)
	}
	for _, kept := range []string{file, execflow.StateFile(file), filepath.Join(work, "keep.txt")} {
		if !exists(kept) {
			t.Errorf("%s was removed", kept)
		}
	}
	for _, gone := range []string{filepath.Join(dir, "other.txt"), filepath.Join(root, "sibling.txt")} {
		if exists(gone) {
			t.Errorf("%s, an output of the failed job, is still there", gone)
		}
	}
}

// A worker that dies under its job cannot remove the job's outputs:
// RemoveOutputs does, after Run, and only for jobs that ran and did not
// succeed.
func TestRemoveOutputsAfterAbort(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "wf.yaml")
	wf := parse(t, file, `
jobs:
  - id: killed
    run: echo half > killed.txt; kill -KILL $PPID; sleep 5
    outputs: [killed.txt]
  - id: fine
    run: echo ok > fine.txt
    outputs: [fine.txt]
    after: [killed]
  - id: other
    run: echo ok > other.txt
    outputs: [other.txt]
`)
	if err := os.WriteFile(filepath.Join(dir, "fine.txt"), []byte("from before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := execflow.Options{Dir: dir, Scratch: t.TempDir()}
	jobs, _ := run(t, wf, 1, opts)
	if st := jobs["killed"].Status(); st != engine.Aborted {
		t.Fatalf("job killed: %s, want aborted", st)
	}
	if !exists(filepath.Join(dir, "killed.txt")) {
		t.Fatal("killed.txt is not there: the command did not run as planned")
	}
	if err := execflow.RemoveOutputs(wf, jobs, opts); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, name := range []string{"killed.txt", "fine.txt", "other.txt"} {
		if exists(filepath.Join(dir, name)) {
			left = append(left, name)
		}
	}
	// fine never ran (Cancelled): what it had is left alone.
	if want := []string{"fine.txt", "other.txt"}; !slices.Equal(left, want) {
		t.Errorf("after RemoveOutputs: %q, want %q", left, want)
	}
}
