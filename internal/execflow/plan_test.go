package execflow_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/workflow"
)

// planTime is the modification time that planFiles counts from.
var planTime = time.Now().Add(-time.Hour).Truncate(time.Second)

// planFiles makes the files and folders of files in dir: a name ending in
// "/" is a folder; each gets planTime plus its minutes as its modification
// time. The folders come last, deepest first, so that making what they
// hold does not change their times.
func planFiles(t *testing.T, dir string, files map[string]int) {
	t.Helper()
	names := slices.Sorted(maps.Keys(files))
	slices.SortStableFunc(names, func(a, b string) int {
		switch fa, fb := strings.HasSuffix(a, "/"), strings.HasSuffix(b, "/"); {
		case fa != fb && fa:
			return 1
		case fa != fb:
			return -1
		case fa:
			return strings.Count(b, "/") - strings.Count(a, "/")
		}
		return 0
	})
	for _, name := range names {
		minutes := files[name]
		path := filepath.Join(dir, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
		} else {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(name), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		at := planTime.Add(time.Duration(minutes) * time.Minute)
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
}

// hashOf is the hash of a command as the state file holds it (see
// execflow.StateFile): the first 16 bytes of its SHA-256, in hexadecimal.
func hashOf(run string) string {
	sum := sha256.Sum256([]byte(run))
	return hex.EncodeToString(sum[:16])
}

// filesHash is the hash of the sorted file names that an input pattern
// matched, as the state file holds it.
func filesHash(names ...string) string {
	h := sha256.New()
	for _, n := range names {
		h.Write([]byte(n + "\x00"))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// madeState returns the state file that records every job of wf with
// outputs as made by its command, as a run that made them leaves it
// (without files under output patterns).
func madeState(wf *workflow.Workflow) string {
	var recs []string
	for _, j := range wf.Jobs {
		if len(j.Outputs) > 0 {
			recs = append(recs, fmt.Sprintf("%q: {\"command\": %q}", j.ID, hashOf(j.Run)))
		}
	}
	return `{"version": 3, "jobs": {` + strings.Join(recs, ", ") + `}}`
}

// recordMade writes the state file of the workflow file at file that
// madeState gives for wf: the jobs as made by their commands.
func recordMade(t *testing.T, file string, wf *workflow.Workflow) {
	t.Helper()
	if err := os.WriteFile(execflow.StateFile(file), []byte(madeState(wf)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// decisions returns, by job id, "run: WHY" or "skip: WHY".
func decisions(p *execflow.Plan) map[string]string {
	out := make(map[string]string)
	for _, d := range p.Decisions {
		verb := "skip"
		if d.Run {
			verb = "run"
		}
		out[d.Job.ID] = verb + ": " + d.Why()
	}
	return out
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]int // made before the plan, at planTime + minutes
		yaml  string
		// state is the state file; "" records every job with outputs as
		// made by its command, as a run that made them leaves it, and
		// "none" writes none.
		state string
		force []string
		want  map[string]string
	}{
		{
			name: "missing output",
			yaml: "jobs:\n  - {id: a, run: x, outputs: [out.txt]}\n",
			want: map[string]string{"a": "run: output out.txt is missing"},
		},
		{
			name:  "up to date",
			files: map[string]int{"in.txt": 0, "out.txt": 1},
			yaml:  "jobs:\n  - {id: a, run: x, inputs: [in.txt], outputs: [out.txt]}\n",
			want:  map[string]string{"a": "skip: up to date"},
		},
		{
			name:  "an input as old as the output",
			files: map[string]int{"in.txt": 1, "out.txt": 1},
			yaml:  "jobs:\n  - {id: a, run: x, inputs: [in.txt], outputs: [out.txt]}\n",
			want:  map[string]string{"a": "skip: up to date"},
		},
		{
			name:  "newer input",
			files: map[string]int{"in.txt": 2, "out.txt": 1},
			yaml:  "jobs:\n  - {id: a, run: x, inputs: [in.txt], outputs: [out.txt]}\n",
			want:  map[string]string{"a": "run: input in.txt is newer than output out.txt"},
		},
		{
			name:  "the oldest output counts",
			files: map[string]int{"in.txt": 2, "out/1.txt": 1, "out/2.txt": 3},
			yaml:  "jobs:\n  - {id: a, run: x, inputs: [in.txt], outputs: [out/2.txt, out/1.txt]}\n",
			want:  map[string]string{"a": "run: input in.txt is newer than output out/1.txt"},
		},
		{
			name:  "missing input that a job makes",
			files: map[string]int{"out.txt": 1},
			yaml:  "jobs:\n  - {id: a, run: x, inputs: [in.txt], outputs: [out.txt]}\n  - {id: b, run: x, outputs: [in.txt]}\n",
			state: `{"version": 3, "jobs": {"a": {"command": "` + hashOf("x") + `"}, "b": {"command": "` + hashOf("x") + `"}}}`,
			want:  map[string]string{"a": "run: reads in.txt, an output of b, which will run", "b": "run: output in.txt is missing"},
		},
		{
			name:  "an input pattern that matches nothing",
			files: map[string]int{"out.txt": 1},
			yaml:  "jobs:\n  - {id: a, run: x, inputs: [\"data/*.csv\"], outputs: [out.txt]}\n",
			want:  map[string]string{"a": "skip: up to date"},
		},
		{
			name:  "an input pattern with a newer match",
			files: map[string]int{"data/a.csv": 0, "data/b.csv": 3, "data/c.tsv": 5, "out.txt": 2},
			yaml:  "jobs:\n  - {id: a, run: x, inputs: [\"data/*.csv\"], outputs: [out.txt]}\n",
			want:  map[string]string{"a": "run: input data/b.csv is newer than output out.txt"},
		},
		{
			name:  "an output pattern that matches nothing",
			files: map[string]int{"out/a.log": 1},
			yaml:  "jobs:\n  - {id: a, run: x, outputs: [\"out/*.txt\"]}\n",
			want:  map[string]string{"a": "run: output out/*.txt is missing"},
		},
		{
			name:  "a folder counts by its own time",
			files: map[string]int{"in.txt": 1, "out/": 2, "out/old.txt": 0},
			yaml:  "jobs:\n  - {id: a, run: x, inputs: [in.txt], outputs: [out]}\n",
			want:  map[string]string{"a": "skip: up to date"},
		},
		{
			name:  "never run here",
			files: map[string]int{"in.txt": 0, "out.txt": 1},
			yaml:  "jobs:\n  - {id: a, run: x, inputs: [in.txt], outputs: [out.txt]}\n",
			state: "none",
			want:  map[string]string{"a": "run: output out.txt exists, but no run of this job is recorded as making it"},
		},
		{
			name:  "a pattern's files and a source beside them",
			files: map[string]int{"src/gen.c": 1, "src/main.c": 2},
			yaml:  "jobs:\n  - {id: gen, run: x, outputs: [\"src/*.c\"]}\n",
			state: `{"version": 3, "jobs": {"gen": {"command": "` + hashOf("x") + `", "made": ["src/gen.c"]}}}`,
			want:  map[string]string{"gen": "skip: up to date"},
		},
		{
			name:  "a pattern over files the job did not make",
			files: map[string]int{"src/main.c": 2},
			yaml:  "jobs:\n  - {id: gen, run: x, outputs: [\"src/*.c\"]}\n",
			state: "none",
			want:  map[string]string{"gen": "run: output src/main.c exists, but no run of this job is recorded as making it"},
		},
		{
			name:  "a pattern recorded before poolrun listed what jobs make",
			files: map[string]int{"src/gen.c": 1},
			yaml:  "jobs:\n  - {id: gen, run: x, outputs: [\"src/*.c\"]}\n",
			state: `{"version": 2, "jobs": {"gen": {"command": "` + hashOf("x") + `"}}}`,
			want:  map[string]string{"gen": "run: output src/gen.c exists, but no run of this job is recorded as making it"},
		},
		{
			name:  "a file the job made is gone",
			files: map[string]int{"out/a.txt": 1, "out/c.txt": 1},
			yaml:  "jobs:\n  - {id: a, run: x, outputs: [\"out/*.txt\"]}\n",
			state: `{"version": 3, "jobs": {"a": {"command": "` + hashOf("x") + `", "made": ["out/a.txt", "out/b.txt"]}}}`,
			want:  map[string]string{"a": "run: output out/b.txt is missing"},
		},
		{
			name:  "the oldest file the job made counts",
			files: map[string]int{"in.txt": 2, "out/a.txt": 3, "out/old.txt": 0},
			yaml:  "jobs:\n  - {id: a, run: x, inputs: [in.txt], outputs: [\"out/*.txt\"]}\n",
			state: `{"version": 3, "jobs": {"a": {"command": "` + hashOf("x") + `", "made": ["out/a.txt"]}}}`,
			want:  map[string]string{"a": "skip: up to date"},
		},
		{
			name:  "a file added to an input pattern, older than the output",
			files: map[string]int{"data/a.csv": 0, "data/b.csv": 0, "out.txt": 2},
			yaml:  "jobs:\n  - {id: a, run: x, inputs: [\"data/*.csv\"], outputs: [out.txt]}\n",
			state: `{"version": 3, "jobs": {"a": {"command": "` + hashOf("x") + `", "inputs": {"n": 1, "hash": "` + filesHash("data/a.csv") + `", "files": ["data/a.csv"]}}}}`,
			want:  map[string]string{"a": "run: input data/*.csv matches data/b.csv, which it did not when the job last ran"},
		},
		{
			name:  "a file gone from an input pattern",
			files: map[string]int{"data/a.csv": 0, "out.txt": 2},
			yaml:  "jobs:\n  - {id: a, run: x, inputs: [\"data/*.csv\"], outputs: [out.txt]}\n",
			state: `{"version": 3, "jobs": {"a": {"command": "` + hashOf("x") + `", "inputs": {"n": 2, "hash": "` + filesHash("data/a.csv", "data/b.csv") + `", "files": ["data/a.csv", "data/b.csv"]}}}}`,
			want:  map[string]string{"a": "run: data/b.csv, which input data/*.csv matched when the job last ran, is gone"},
		},
		{
			name:  "the same files as when it last ran",
			files: map[string]int{"data/a.csv": 0, "out.txt": 2},
			yaml:  "jobs:\n  - {id: a, run: x, inputs: [\"data/*.csv\"], outputs: [out.txt]}\n",
			state: `{"version": 3, "jobs": {"a": {"command": "` + hashOf("x") + `", "inputs": {"n": 1, "hash": "` + filesHash("data/a.csv") + `"}}}}`,
			want:  map[string]string{"a": "skip: up to date"},
		},
		{
			name:  "changed command",
			files: map[string]int{"in.txt": 0, "out.txt": 1},
			yaml:  "jobs:\n  - {id: a, run: x --new, inputs: [in.txt], outputs: [out.txt]}\n",
			state: `{"version": 1, "jobs": {"a": {"command": "` + hashOf("x --old") + `"}}}`,
			want:  map[string]string{"a": "run: its command changed"},
		},
		{
			name:  "the command that made the outputs",
			files: map[string]int{"in.txt": 0, "out.txt": 1},
			yaml:  "jobs:\n  - {id: a, run: x --new, inputs: [in.txt], outputs: [out.txt]}\n",
			state: `{"version": 1, "jobs": {"a": {"command": "` + hashOf("x --new") + `"}, "gone": {"command": "0"}}}`,
			want:  map[string]string{"a": "skip: up to date"},
		},
		{
			name:  "after a job that runs, transitively",
			files: map[string]int{"b.txt": 1, "c.txt": 2, "d.txt": 3},
			yaml: "jobs:\n  - {id: a, run: x, outputs: [a.txt]}\n  - {id: b, run: x, outputs: [b.txt], after: [a]}\n" +
				"  - {id: c, run: x, outputs: [c.txt], after: [b]}\n  - {id: d, run: x, outputs: [d.txt]}\n",
			want: map[string]string{
				"a": "run: output a.txt is missing", "b": "run: runs after a, which will run",
				"c": "run: runs after b, which will run", "d": "skip: up to date",
			},
		},
		{
			name:  "newer output of a job it runs after",
			files: map[string]int{"in.txt": 0, "a.txt": 3, "b.txt": 2},
			yaml:  "jobs:\n  - {id: b, run: x, outputs: [b.txt], after: [a]}\n  - {id: a, run: x, inputs: [in.txt], outputs: [a.txt]}\n",
			want: map[string]string{
				"a": "skip: up to date", "b": "run: output a.txt of a is newer than output b.txt",
			},
		},
		{
			name:  "no outputs",
			files: map[string]int{"a.txt": 1},
			yaml:  "jobs:\n  - {id: a, run: x, outputs: [a.txt]}\n  - {id: b, run: x, inputs: [a.txt], after: [a]}\n",
			want:  map[string]string{"a": "skip: up to date", "b": "run: no outputs declared"},
		},
		{
			name:  "forced",
			files: map[string]int{"a.txt": 1, "b.txt": 2, "c.txt": 1},
			yaml: "jobs:\n  - {id: a, run: x, outputs: [a.txt]}\n  - {id: b, run: x, outputs: [b.txt], after: [a]}\n" +
				"  - {id: c, run: x, outputs: [c.txt]}\n",
			force: []string{"a"},
			want: map[string]string{
				"a": "run: forced", "b": "run: runs after a, which will run", "c": "skip: up to date",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			planFiles(t, dir, tt.files)
			wf := parse(t, "wf.yaml", tt.yaml)
			state := tt.state
			if state == "" {
				state = madeState(wf)
			}
			if state != "none" {
				if err := os.WriteFile(execflow.StateFile("wf.yaml"), []byte(state), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var opts execflow.PlanOptions
			for _, id := range tt.force {
				if opts.Force == nil {
					opts.Force = map[string]bool{}
				}
				opts.Force[id] = true
			}
			p, err := execflow.NewPlan(wf, opts)
			if err != nil {
				t.Fatal(err)
			}
			got := decisions(p)
			for id, want := range tt.want {
				if got[id] != want {
					t.Errorf("job %s: %q, want %q", id, got[id], want)
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("decisions %q, want %q", got, tt.want)
			}
		})
	}
}

// An input that no job makes must exist: NewPlan names each that does
// not, unless its job runs after one without outputs.
func TestPlanMissingSource(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	planFiles(t, dir, map[string]int{"here.txt": 0})
	wf := parse(t, "wf.yaml", `
jobs:
  - {id: a, run: x, inputs: [here.txt, gone.txt], outputs: [a.txt]}
  - {id: b, run: x, inputs: [a.txt, "*.csv", gone2.txt]}
  - {id: setup, run: x}
  - {id: c, run: x, inputs: [made-by-setup.txt], after: [setup]}
`)
	_, err := execflow.NewPlan(wf, execflow.PlanOptions{})
	want := "wf.yaml:3: job \"a\": input gone.txt: it does not exist, and no job makes it\n" +
		"wf.yaml:4: job \"b\": input gone2.txt: it does not exist, and no job makes it"
	if !errors.Is(err, execflow.ErrNoSource) || err.Error() != want {
		t.Errorf("NewPlan: %v\nwant ErrNoSource:\n%s", err, want)
	}
}

// The paths a plan names are relative to the current folder as the
// workflow file's name is, or absolute; inputs and outputs are read
// relative to the workflow's folder, whatever the current folder is.
func TestPlanPaths(t *testing.T) {
	dir := t.TempDir()
	planFiles(t, dir, map[string]int{"sub/in.txt": 2, "sub/out.txt": 1})
	abs := filepath.Join(dir, "sub", "abs.txt")
	text := "jobs:\n  - {id: a, run: x, inputs: [in.txt], outputs: [out.txt]}\n  - {id: b, run: x, outputs: ['" + abs + "']}\n"
	if err := os.WriteFile(filepath.Join(dir, "sub", "wf.yaml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	wf, err := workflow.Load("sub/wf.yaml")
	if err != nil {
		t.Fatal(err)
	}
	recordMade(t, "sub/wf.yaml", wf)
	p, err := execflow.NewPlan(wf, execflow.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := decisions(p)
	if want := "run: input sub/in.txt is newer than output sub/out.txt"; got["a"] != want {
		t.Errorf("job a: %q, want %q", got["a"], want)
	}
	if want := "run: output " + abs + " is missing"; got["b"] != want {
		t.Errorf("job b: %q, want %q", got["b"], want)
	}
}

// NewPlan writes nothing, and a workflow without outputs has no state
// file, read or written.
func TestPlanWritesNothing(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	wf := parse(t, "wf.yaml", "jobs:\n  - {id: a, run: 'true'}\n  - {id: b, run: 'true', after: [a]}\n")
	// A state file that is not one: not even read.
	if err := os.WriteFile(execflow.StateFile("wf.yaml"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := execflow.NewPlan(wf, execflow.PlanOptions{})
	if err != nil {
		t.Fatalf("NewPlan read the state file of a workflow without outputs: %v", err)
	}
	os.Remove(execflow.StateFile("wf.yaml"))
	jobs, _ := run(t, wf, 0, execflow.Options{Plan: p})
	if err := p.Save(jobs); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the folder holds %s", entries[0].Name())
	}
}

func TestPlanBadState(t *testing.T) {
	for _, tt := range []struct{ name, state, want string }{
		{"not JSON", "{", "unexpected end of JSON input"},
		{"another version", `{"version": 4, "jobs": {}}`, "version 4, want 1 to 3"},
		{"a status in version 1", `{"version": 1, "jobs": {"a": {"command": "x", "status": "started"}}}`, `job "a": unknown status "started"`},
		{"an unknown status", `{"version": 2, "jobs": {"a": {"command": "x", "status": "half"}}}`, `job "a": unknown status "half"`},
		{"not a state", `{"version": 1, "jobs": [1]}`, "cannot unmarshal"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			wf := parse(t, "wf.yaml", "jobs:\n  - {id: a, run: x, outputs: [a.txt]}\n")
			path := execflow.StateFile("wf.yaml")
			if err := os.WriteFile(path, []byte(tt.state), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := execflow.NewPlan(wf, execflow.PlanOptions{})
			if !errors.Is(err, execflow.ErrBadState) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewPlan: %v; want ErrBadState naming %s and saying %q", err, path, tt.want)
			}
		})
	}
}

// A run with a plan: the jobs it skips end Skipped, without their items;
// Save records the jobs that succeeded or were skipped, forgets those that
// failed, writes atomically with the umask's mode, and only on a change.
func TestPlanQueueAndSave(t *testing.T) {
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	for _, m := range modes[:2] {
		t.Run(m.name, func(t *testing.T) {
			dir, scratch := t.TempDir(), t.TempDir()
			t.Chdir(dir)
			planFiles(t, dir, map[string]int{"in.txt": 0, "done.txt": 1})
			const text = `
items:
  ref:
    run: echo built >> item.log; echo x > "$POOLRUN_ITEM"
jobs:
  - id: done
    run: echo done >> ran.log; echo d > done.txt
    inputs: [in.txt]
    outputs: [done.txt]
    needs: [ref]
  - id: next
    run: echo next >> ran.log; echo n > next.txt
    inputs: [done.txt]
    outputs: [next.txt]
    after: [done]
  - id: bad
    run: echo half > bad.txt; exit 1
    outputs: [bad.txt]
  - id: free
    run: echo free >> ran.log
    after: [done]
`
			wf := parse(t, "wf.yaml", text)
			// An earlier run made done.txt.
			doneState := `{"version":3,"jobs":{"done":{"command":"` + hashOf("echo done >> ran.log; echo d > done.txt") + `"}}}`
			if err := os.WriteFile(execflow.StateFile("wf.yaml"), []byte(doneState), 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := execflow.NewPlan(wf, execflow.PlanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if run, skip := p.Counts(); run != 3 || skip != 1 {
				t.Errorf("Counts() = %d, %d; want 3, 1", run, skip)
			}
			jobs, _ := run(t, wf, m.workers, execflow.Options{Dir: dir, Scratch: scratch, Plan: p})
			for id, want := range map[string]engine.Status{"done": engine.Skipped, "next": engine.Succeeded, "bad": engine.Failed, "free": engine.Succeeded} {
				if got := jobs[id].Status(); got != want {
					t.Errorf("job %s: %s, want %s", id, got, want)
				}
			}
			if data, _ := os.ReadFile("ran.log"); string(data) != "next\nfree\n" && string(data) != "free\nnext\n" {
				t.Errorf("ran.log: %q, want next and free", data)
			}
			if _, err := os.Stat("item.log"); err == nil {
				t.Error("the item of the skipped job was built")
			}
			if _, err := os.Stat("bad.txt"); err == nil {
				t.Error("the failed job's output is still there")
			}
			if err := p.Save(jobs); err != nil {
				t.Fatal(err)
			}
			state := execflow.StateFile("wf.yaml")
			data, err := os.ReadFile(state)
			if err != nil {
				t.Fatal(err)
			}
			want := `{"version":3,"jobs":{"bad":{"command":"` + hashOf("echo half > bad.txt; exit 1") + `","status":"failed"},"done":{"command":"` + hashOf("echo done >> ran.log; echo d > done.txt") +
				`"},"next":{"command":"` + hashOf("echo next >> ran.log; echo n > next.txt") + `"}}}` + "\n"
			if string(data) != want {
				t.Errorf("state file:\n%s\nwant:\n%s", data, want)
			}
			fi, err := os.Stat(state)
			if err != nil {
				t.Fatal(err)
			}
			if mode := fi.Mode().Perm(); mode != 0o640 {
				t.Errorf("state file mode %v, want 0640 (0666 less the umask 027)", mode)
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if strings.Contains(e.Name(), ".tmp-") {
					t.Errorf("a temporary file is left: %s", e.Name())
				}
			}

			// The next plan skips what is done; a Save that changes
			// nothing does not write.
			p2, err := execflow.NewPlan(wf, execflow.PlanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := decisions(p2)
			if got["done"] != "skip: up to date" || got["next"] != "skip: up to date" || got["bad"] != "run: it failed in the last run" {
				t.Errorf("second plan: %q", got)
			}
			before := time.Now().Add(-time.Hour)
			os.Chtimes(state, before, before)
			if err := p2.Save(map[string]*engine.Job[execflow.Result]{}); err != nil {
				t.Fatal(err)
			}
			if fi, _ := os.Stat(state); !fi.ModTime().Equal(before) {
				t.Error("a Save without a change wrote the state file")
			}
		})
	}
}

func TestPlanWriteText(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	planFiles(t, dir, map[string]int{"raw.csv": 0, "clean.csv": 1})
	wf := parse(t, "wf.yaml", `
jobs:
  - {id: clean, run: x, inputs: [raw.csv], outputs: [clean.csv]}
  - {id: plot-a, run: x, inputs: [clean.csv], outputs: [plot-a.png], after: [clean]}
  - {id: report, run: x, after: [plot-a]}
`)
	recordMade(t, "wf.yaml", wf)
	p, err := execflow.NewPlan(wf, execflow.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := p.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "skip  clean   up to date\n" +
		"run   plot-a  output plot-a.png is missing\n" +
		"run   report  no outputs declared\n" +
		"2 to run, 1 to skip\n"
	if b.String() != want {
		t.Errorf("WriteText:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestPlanWriteDot(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	planFiles(t, dir, map[string]int{"a.txt": 1})
	wf := parse(t, "wf.yaml", `
jobs:
  - {id: a, run: x, outputs: [a.txt]}
  - {id: 'b-${i}', foreach: {i: [1, 2]}, run: x, outputs: ['b "${i}".txt'], after: [a]}
`)
	recordMade(t, "wf.yaml", wf)
	p, err := execflow.NewPlan(wf, execflow.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := p.WriteDot(&b); err != nil {
		t.Fatal(err)
	}
	want := `digraph "wf.yaml" {
	graph [rankdir=LR, labelloc=t, fontname="Helvetica", label="wf.yaml: 2 to run (orange), 1 to skip (grey)"];
	node [shape=box, style="rounded,filled", fontname="Helvetica"];
	"a" [fillcolor="#d9d9d9", tooltip="skip: up to date"];
	"b-1" [fillcolor="#f4a261", tooltip="run: output b \"1\".txt is missing"];
	"b-2" [fillcolor="#f4a261", tooltip="run: output b \"2\".txt is missing"];
	"a" -> "b-1";
	"a" -> "b-2";
}
`
	if b.String() != want {
		t.Errorf("WriteDot:\n%s\nwant:\n%s", b.String(), want)
	}
}

// NewPlan refuses a workflow that Parse would not give, as Queue does.
func TestPlanRefusesBadWorkflow(t *testing.T) {
	wf := &workflow.Workflow{File: "hand.yaml", Jobs: []*workflow.Job{
		{ID: "b", Run: "x", After: []string{"a"}, Entry: &workflow.Entry{Line: 2}},
		{ID: "a", Run: "x", Entry: &workflow.Entry{Line: 3}},
	}}
	_, err := execflow.NewPlan(wf, execflow.PlanOptions{})
	if want := `execflow: hand.yaml:2: job "b" runs after "a", which is unknown or comes later in the workflow`; err == nil || err.Error() != want {
		t.Errorf("NewPlan: %v, want %s", err, want)
	}
}

// TestBatchQueueTwice: a batch is queued once; a second Queue panics, and
// Prepare fails as Queue does, queueing nothing.
func TestBatchQueueTwice(t *testing.T) {
	wf, err := workflow.Parse("wf.yaml", []byte("jobs:\n  - {id: a, run: \"true\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := execflow.Prepare(wf, execflow.Options{Scratch: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p := engine.New(engine.Workers(0))
	if jobs := b.Queue(p); len(jobs) != 1 || jobs["a"] == nil {
		t.Fatalf("Batch.Queue returned %v, want job a", jobs)
	}
	func() {
		defer func() {
			if v := recover(); v == nil || !strings.Contains(fmt.Sprint(v), "twice") {
				t.Errorf("a second Batch.Queue: panic %v, want one that says it was called twice", v)
			}
		}()
		b.Queue(p)
	}()
	if _, err := execflow.Prepare(wf, execflow.Options{Dir: filepath.Join(t.TempDir(), "none")}); err == nil {
		t.Error("Prepare with a folder that does not exist: no error")
	}
}

// With a workdir, inputs and outputs are read there, and shown relative to
// the current folder; a dependency inferred from a file says so, in the
// plan's reasons and as a dashed edge of its graph.
func TestPlanWorkdirAndInferred(t *testing.T) {
	dir := t.TempDir()
	planFiles(t, dir, map[string]int{"work/raw.csv": 2, "work/clean.csv": 1, "flows/": 0})
	text := `workdir: ../work
jobs:
  - {id: plot, run: x, inputs: [clean.csv], outputs: [plot.png]}
  - {id: clean, run: x, inputs: [raw.csv], outputs: [clean.csv]}
`
	if err := os.WriteFile(filepath.Join(dir, "flows", "wf.yaml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	wf, err := workflow.Load("flows/wf.yaml")
	if err != nil {
		t.Fatal(err)
	}
	recordMade(t, "flows/wf.yaml", wf)
	p, err := execflow.NewPlan(wf, execflow.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"clean": "run: input work/raw.csv is newer than output work/clean.csv",
		"plot":  "run: output work/plot.png is missing",
	}
	if got := decisions(p); !maps.Equal(got, want) {
		t.Errorf("decisions %q, want %q", got, want)
	}
	planFiles(t, dir, map[string]int{"work/raw.csv": 1, "work/clean.csv": 2, "work/plot.png": 3})
	if err := os.WriteFile(filepath.Join(dir, "flows", ".wf.yaml.poolrun-state"), []byte(`{"version":3,"jobs":{"clean":{"command":"`+hashOf("x")+`","status":"failed"},"plot":{"command":"`+hashOf("x")+`"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err = execflow.NewPlan(wf, execflow.PlanOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, want := decisions(p)["plot"], "run: reads clean.csv, an output of clean, which will run"; got != want {
		t.Errorf("plot: %q, want %q", got, want)
	}
	var b bytes.Buffer
	if err := p.WriteDot(&b); err != nil {
		t.Fatal(err)
	}
	if want := "\t\"clean\" -> \"plot\" [style=dashed, tooltip=\"inferred: plot reads clean.csv, an output of clean\"];\n"; !strings.Contains(b.String(), want) {
		t.Errorf("WriteDot:\n%s\nwant a line %q", b.String(), want)
	}
}
