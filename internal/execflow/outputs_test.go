package execflow_test

import (
	"context"
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
// removes what the command wrote of them when the job fails: its command
// failed, or an output is missing. What was there before and is as it was
// stays, and a command that exits 0 leaving an output as it was succeeds.
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
    run: test ! -e out/stale.txt && echo new > out/stale.txt
    outputs: [out/stale.txt]
  - id: nomatch
    run: touch out/other.txt
    outputs: ["out/none-*.txt"]
  - id: folder
    run: mkdir out/existing && touch out/existing/inside.txt
    outputs: [out/existing]
  - id: good
    run: echo ok > out/good.txt; echo ok > out/good-1.part
    outputs: [out/good.txt, "out/good-*.part"]
  - id: rewritten
    run: echo new > out/rewritten.txt
    outputs: [out/rewritten.txt]
  - id: untouched
    run: exit 1
    outputs: [out/untouched.txt, "out/untouched-*.txt"]
  - id: some
    run: echo new > out/some-new.txt; touch out/.some-hidden.txt; exit 1
    outputs: ["out/some-*.txt", "out/*.txt.tmp"]
  - id: predone
    run: mkdir -p out/predone && touch out/predone/new; exit 2
    outputs: [out/predone]
`
	for _, m := range modes[:2] {
		t.Run(m.name, func(t *testing.T) {
			dir, scratch := t.TempDir(), t.TempDir()
			out := filepath.Join(dir, "out")
			for _, d := range []string{"existing", "predone"} {
				if err := os.MkdirAll(filepath.Join(out, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			old := time.Now().Add(-time.Hour)
			for _, name := range []string{"stale.txt", "rewritten.txt", "fails.txt", "untouched.txt", "untouched-1.txt", "some-old.txt", "predone/old"} {
				if err := os.WriteFile(filepath.Join(out, name), []byte("old\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				os.Chtimes(filepath.Join(out, name), old, old)
			}
			file := filepath.Join(dir, "wf.yaml")
			wf := parse(t, file, text)
			jobs, _ := run(t, wf, m.workers, execflow.Options{Dir: dir, Scratch: scratch})

			removed := "\npoolrun removed what the job wrote: "
			wantErr := map[string]string{
				"fails":     `job "fails" (` + file + `:3): exit status 3` + removed + filepath.Join(out, "fails.txt") + ", " + filepath.Join(out, "dir") + ", " + filepath.Join(out, "fails-1.part"),
				"lazy":      `job "lazy" (` + file + `:6): output ` + filepath.Join(out, "lazy.txt") + `: the command exited 0 without making this output`,
				"nomatch":   `job "nomatch" (` + file + `:12): output ` + filepath.Join(out, "none-*.txt") + `: the command exited 0 without making this output (nothing matches the pattern)`,
				"untouched": `job "untouched" (` + file + `:24): exit status 1`,
				"some":      `job "some" (` + file + `:27): exit status 1` + removed + filepath.Join(out, "some-new.txt"),
				"predone":   `job "predone" (` + file + `:30): exit status 2` + removed + filepath.Join(out, "predone"),
			}
			for _, id := range sortedKeys(jobs) {
				_, err := jobs[id].Result()
				want, fails := wantErr[id]
				switch {
				case !fails && jobs[id].Status() != engine.Succeeded:
					t.Errorf("job %s: %s (%v), want succeeded", id, jobs[id].Status(), err)
				case fails && (jobs[id].Status() != engine.Failed || err == nil || err.Error() != want):
					t.Errorf("job %s: %s, error\n%v\nwant failed with\n%s", id, jobs[id].Status(), err, want)
				}
			}
			if ce, ok := execflow.AsCommandError(func() error { _, err := jobs["fails"].Result(); return err }()); !ok || ce.ExitCode != 3 || ce.StderrTail != "" {
				t.Errorf("AsCommandError of fails: %+v, %v; want exit status 3 and no stderr (the removal line is not the command's)", ce, ok)
			}
			for _, gone := range []string{"dir", "fails-1.part", "some-new.txt", "predone/new", ".fails.txt.poolrun-aside", ".existing.poolrun-aside", ".stale.txt.poolrun-aside"} {
				if exists(filepath.Join(out, gone)) {
					t.Errorf("out/%s is still there", gone)
				}
			}
			for _, kept := range []string{"good.txt", "good-1.part", "rewritten.txt", "existing/inside.txt", "other.txt", "stale.txt",
				"untouched.txt", "untouched-1.txt", "some-old.txt", ".some-hidden.txt", "predone/old"} {
				if !exists(filepath.Join(out, kept)) {
					t.Errorf("out/%s is gone", kept)
				}
			}
			// A failed job's last outputs are back as they were; a
			// command that succeeds started without them.
			for name, want := range map[string]string{"fails.txt": "old\n", "untouched.txt": "old\n", "stale.txt": "new\n", "rewritten.txt": "new\n"} {
				if data, err := os.ReadFile(filepath.Join(out, name)); err != nil || string(data) != want {
					t.Errorf("out/%s: %q, %v; want %q", name, data, err, want)
				}
			}
		})
	}
}

// A worker that dies under its job cannot remove what the job wrote: it
// is left, and the state file says that the job failed, so that the next
// run runs it whatever the times of its outputs say.
func TestAbortedJobRunsAgain(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "wf.yaml")
	wf := parse(t, file, `
jobs:
  - id: killed
    run: echo half > killed.txt; kill -KILL $PPID; sleep 5
    outputs: [killed.txt]
  - id: other
    run: echo ok > other.txt
    outputs: [other.txt]
`)
	plan, err := execflow.NewPlan(wf, execflow.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Begin(); err != nil {
		t.Fatal(err)
	}
	opts := execflow.Options{Dir: dir, Scratch: t.TempDir(), Plan: plan}
	p := engine.New(engine.Workers(1), plan.Recorder())
	jobs, err := execflow.Queue(p, wf, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	p.Run(ctx)
	if st := jobs["killed"].Status(); st != engine.Aborted {
		t.Fatalf("job killed: %s, want aborted", st)
	}
	if err := plan.Save(jobs); err != nil {
		t.Fatal(err)
	}
	if !exists(filepath.Join(dir, "killed.txt")) {
		t.Fatal("killed.txt is not there: the command did not run as planned")
	}
	next, err := execflow.NewPlan(wf, execflow.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := next.Decisions[0]
	if !got.Run || got.Reason != execflow.LastFailed || got.Why() != "it failed in the last run" {
		t.Errorf("next plan of killed: run %v, %q; want run, it failed in the last run", got.Run, got.Why())
	}
	if d := next.Decisions[1]; d.Run {
		t.Errorf("next plan of other: run (%s), want skip", d.Why())
	}
}

// The jobs a run began and did not see end are not done: the next plan
// runs them, whatever the times of their outputs say.
func TestIncompleteJobRunsAgain(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "wf.yaml")
	wf := parse(t, file, `
jobs:
  - id: a
    run: echo a > a.txt
    outputs: [a.txt]
  - id: b
    run: echo b > b.txt
    outputs: [b.txt]
`)
	for _, name := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("partial\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	recordMade(t, file, wf) // an earlier run made both
	plan, err := execflow.NewPlan(wf, execflow.PlanOptions{Force: map[string]bool{"a": true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Begin(); err != nil {
		t.Fatal(err)
	}
	// Cut off here: nothing saved. Begin's record is on disk already.
	data, err := os.ReadFile(execflow.StateFile(file))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"status":"started"`) {
		t.Errorf("state file after Begin: %s; want a started job", data)
	}
	next, err := execflow.NewPlan(wf, execflow.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range next.Decisions {
		got = append(got, d.Job.ID+": "+d.Why())
	}
	want := []string{"a: incomplete (the last run was cut off)", "b: up to date"}
	if !slices.Equal(got, want) {
		t.Errorf("plan after a cut-off run: %q, want %q", got, want)
	}
}

// A job's outputs are the files it made: of what its pattern matches, a
// failed run removes only what it created and what the state file
// records as the job's and it changed, never a file that was there
// before and is not the job's, even one changed meanwhile; a run that
// succeeds records what it made, and the next plan judges the job by
// that alone.
func TestOutputsAreWhatTheJobMade(t *testing.T) {
	dir, scratch := t.TempDir(), t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "main.c"), []byte("int main;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "wf.yaml")
	// The command stands for the user too: it saves main.c while the job
	// runs, then fails.
	failing := parse(t, file, `
jobs:
  - id: gen
    run: echo '// generated' > src/gen.c; echo '// saved' >> src/main.c; exit 1
    outputs: ["src/*.c"]
`)
	plan, err := execflow.NewPlan(failing, execflow.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := decisions(plan)["gen"]; got != "run: output "+filepath.Join(src, "main.c")+" exists, but no run of this job is recorded as making it" {
		t.Errorf("first plan over a hand-written file: %q", got)
	}
	jobs, _ := run(t, failing, 0, execflow.Options{Dir: dir, Scratch: scratch, Plan: plan})
	_, err = jobs["gen"].Result()
	if want := "poolrun removed what the job wrote: " + filepath.Join(src, "gen.c"); err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("error %v, want it to end %q", err, want)
	}
	if data, _ := os.ReadFile(filepath.Join(src, "main.c")); string(data) != "int main;\n// saved\n" {
		t.Errorf("src/main.c holds %q: the user's file was touched", data)
	}
	if exists(filepath.Join(src, "gen.c")) {
		t.Error("src/gen.c, which the failed job made, is still there")
	}

	// A success records gen.c alone; the next plan skips the job.
	good := parse(t, file, `
jobs:
  - id: gen
    run: echo '// generated' > src/gen.c
    outputs: ["src/*.c"]
`)
	plan, err = execflow.NewPlan(good, execflow.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err = run(t, good, 0, execflow.Options{Dir: dir, Scratch: scratch, Plan: plan})
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := jobs["gen"].Result(); !slices.Equal(res.Outputs, []string{"src/gen.c"}) {
		t.Errorf("Result.Outputs %q, want [src/gen.c]", res.Outputs)
	}
	if err := plan.Save(jobs); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(execflow.StateFile(file)); !strings.Contains(string(data), `"made":["src/gen.c"]`) {
		t.Errorf("state file %s, want gen.c made", data)
	}
	plan, err = execflow.NewPlan(good, execflow.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := decisions(plan)["gen"]; got != "skip: up to date" {
		t.Errorf("plan after the success: %q", got)
	}

	// A failed forced run removes the recorded file it changed, and
	// still leaves main.c.
	bad := parse(t, file, `
jobs:
  - id: gen
    run: echo '// half' > src/gen.c; touch src/main.c; exit 1
    outputs: ["src/*.c"]
`)
	plan, err = execflow.NewPlan(bad, execflow.PlanOptions{Force: map[string]bool{"gen": true}})
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ = run(t, bad, 0, execflow.Options{Dir: dir, Scratch: scratch, Plan: plan})
	if _, err := jobs["gen"].Result(); err == nil || !strings.HasSuffix(err.Error(), "wrote: "+filepath.Join(src, "gen.c")) {
		t.Errorf("forced failure: %v", err)
	}
	if !exists(filepath.Join(src, "main.c")) {
		t.Error("after the forced failure: main.c is gone")
	}
	// The last run's gen.c is back.
	if data, _ := os.ReadFile(filepath.Join(src, "gen.c")); string(data) != "// generated\n" {
		t.Errorf("after the forced failure, gen.c holds %q, want the last run's", data)
	}
}

// A command that exits 0 having made no file of its pattern fails, and
// says that what matches was there before.
func TestOutputPatternMatchingOthersOnly(t *testing.T) {
	dir, scratch := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "old.log"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "wf.yaml")
	wf := parse(t, file, "jobs:\n  - id: a\n    run: \"true\"\n    outputs: [\"*.log\"]\n")
	jobs, _ := run(t, wf, 0, execflow.Options{Dir: dir, Scratch: scratch})
	_, err := jobs["a"].Result()
	want := "the command made no file that the pattern matches; " + filepath.Join(dir, "old.log") + " was there before, and is not the job's"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want it to say %q", err, want)
	}
	if !exists(filepath.Join(dir, "old.log")) {
		t.Error("old.log was removed")
	}
}

// What a job makes through a link it made to a folder outside is neither
// taken for its output nor removed.
func TestOutputsThroughLinkStayOutside(t *testing.T) {
	root, scratch := t.TempDir(), t.TempDir()
	dir, victim := filepath.Join(root, "wf"), filepath.Join(root, "victim")
	for _, d := range []string{dir, victim} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "wf.yaml")
	wf := parse(t, file, "jobs:\n  - id: a\n    run: rmdir link && ln -s ../victim link && touch link/x; exit 1\n    outputs: [\"link/*\"]\n  - id: b\n    run: rmdir link2 && ln -s ../victim link2 && touch link2/y\n    outputs: [\"link2/*\"]\n")
	jobs, _ := run(t, wf, 0, execflow.Options{Dir: dir, Scratch: scratch})
	if !exists(filepath.Join(victim, "x")) {
		t.Error("the failed job's cleanup removed victim/x, outside the workflow's folder")
	}
	_, err := jobs["b"].Result()
	if want := "lies in " + victim + " once links are followed, outside the working folder"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("job b: %v, want it failed saying %q", err, want)
	}
	if !exists(filepath.Join(victim, "y")) {
		t.Error("victim/y was removed")
	}
}
