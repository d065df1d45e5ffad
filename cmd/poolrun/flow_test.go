package main_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// ranFiles returns the sorted names of the ran-* files in dir: each job of the
// tests' workflows touches ran-ID.
func ranFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "ran-*"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range files {
		ids = append(ids, strings.TrimPrefix(filepath.Base(f), "ran-"))
	}
	slices.Sort(ids)
	return ids
}

// targetsWorkflow has jobs linked by after: and by files, and one that
// nothing needs.
const targetsWorkflow = `jobs:
  - id: prep
    run: touch ran-prep && echo p > prep.txt
    outputs: [prep.txt]
  - id: part-${i}
    foreach: {i: 1..3}
    run: touch ran-part-${i} && cat prep.txt > part-${i}.txt
    inputs: [prep.txt]
    outputs: ["part-${i}.txt"]
  - id: merge
    run: touch ran-merge && cat part-*.txt > merged.txt
    inputs: ["part-*.txt"]
    outputs: [merged.txt]
  - id: side
    run: touch ran-side
    after: [prep]
  - id: unrelated
    run: touch ran-unrelated
`

// A target runs what it needs, through after: and inferred dependencies,
// and nothing else; -n and --dag take targets too.
func TestRunTargets(t *testing.T) {
	tests := []struct {
		name    string
		targets []string
		want    []string
	}{
		{"through inferred edges", []string{"merge"}, []string{"merge", "part-1", "part-2", "part-3", "prep"}},
		{"a glob and after:", []string{"part-[12]", "side"}, []string{"part-1", "part-2", "prep", "side"}},
		{"a job that needs nothing", []string{"unrelated"}, []string{"unrelated"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"wf.yaml": targetsWorkflow})
			r := poolrun(t, dir, append([]string{"run", "-n", "wf.yaml"}, tt.targets...)...)
			if r.code != 0 {
				t.Fatalf("-n: exit %d\n%s", r.code, r.stderr)
			}
			var planned []string
			for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				if f := strings.Fields(l); len(f) >= 2 && f[0] == "run" {
					planned = append(planned, f[1])
				}
			}
			slices.Sort(planned)
			if !slices.Equal(planned, tt.want) {
				t.Errorf("-n plans %q, want %q:\n%s", planned, tt.want, r.stdout)
			}
			r = poolrun(t, dir, append([]string{"run", "--dag", "wf.yaml"}, tt.targets...)...)
			for _, id := range []string{"prep", "merge", "unrelated"} {
				if in := strings.Contains(r.stdout, strconv.Quote(id)+" [fill"); in != slices.Contains(tt.want, id) {
					t.Errorf("--dag: node %s drawn: %v\n%s", id, in, r.stdout)
				}
			}
			if len(ranFiles(t, dir)) > 0 {
				t.Fatalf("-n or --dag ran jobs: %q", ranFiles(t, dir))
			}
			r = poolrun(t, dir, append([]string{"run", "-j", "2", "wf.yaml"}, tt.targets...)...)
			if r.code != 0 {
				t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			if got := ranFiles(t, dir); !slices.Equal(got, tt.want) {
				t.Errorf("ran %q, want %q", got, tt.want)
			}
		})
	}
}

// A run of a target keeps what the state file knows of the other jobs:
// here that the command of part-* changed since it made its outputs,
// which the file times alone do not show.
func TestRunTargetKeepsState(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.yaml": targetsWorkflow})
	if r := poolrun(t, dir, "run", "wf.yaml"); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	changed := strings.Replace(targetsWorkflow, "cat prep.txt > part-${i}.txt", "cat prep.txt prep.txt > part-${i}.txt", 1)
	writeFiles(t, dir, map[string]string{"wf.yaml": changed})
	if r := poolrun(t, dir, "run", "wf.yaml", "prep"); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	r := poolrun(t, dir, "run", "-n", "-v", "wf.yaml")
	if !strings.Contains(r.stdout, "skip  prep ") || !strings.Contains(r.stdout, "run   part-1     its command changed") {
		t.Errorf("after a run of the target prep:\n%s", r.stdout)
	}
}

// An input that is another job's output orders the two jobs: the consumer,
// written first, starts once the producer has ended.
func TestRunInferredOrder(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.yaml": `jobs:
  - id: consume
    run: date +%s%N > consume.start && cat made.txt > copy.txt
    inputs: [made.txt]
    outputs: [copy.txt]
  - id: produce
    run: seq 1 200000 > made.tmp && mv made.tmp made.txt && date +%s%N > produce.end
    outputs: [made.txt]
`})
	r := poolrun(t, dir, "run", "-j", "2", "wf.yaml")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if got := read("copy.txt"); !strings.HasSuffix(got, "\n200000") {
		t.Errorf("copy.txt ends %q, want the whole of made.txt", got[max(0, len(got)-20):])
	}
	start, err1 := strconv.ParseInt(read("consume.start"), 10, 64)
	end, err2 := strconv.ParseInt(read("produce.end"), 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if start < end {
		t.Errorf("consume started %dns before produce ended", end-start)
	}
	r = poolrun(t, dir, "run", "--dag", "wf.yaml")
	if !strings.Contains(r.stdout, `"produce" -> "consume" [style=dashed`) {
		t.Errorf("--dag does not draw the inferred edge dashed:\n%s", r.stdout)
	}
}

// --set overrides vars:, and a job whose command it changes runs again.
func TestRunSetVars(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.yaml": `vars:
  greeting: hello
  n: "2"
jobs:
  - id: say-${i}
    foreach: {i: "1..${n}"}
    run: echo ${greeting} ${i} > said-${i}.txt
    outputs: ["said-${i}.txt"]
`})
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return strings.TrimSpace(string(b))
	}
	if r := poolrun(t, dir, "run", "wf.yaml"); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if got := read("said-2.txt"); got != "hello 2" {
		t.Errorf("said-2.txt: %q", got)
	}
	r := poolrun(t, dir, "run", "-n", "wf.yaml", "--set", "greeting=bye")
	if !strings.Contains(r.stdout, "run  say-1  its command changed") {
		t.Errorf("-n --set:\n%s", r.stdout)
	}
	if r := poolrun(t, dir, "run", "--set", "greeting=bye", "--set=n=3", "wf.yaml"); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for i, want := range []string{"bye 1", "bye 2", "bye 3"} {
		if got := read("said-" + strconv.Itoa(i+1) + ".txt"); got != want {
			t.Errorf("said-%d.txt: %q, want %q", i+1, got, want)
		}
	}
}

// The commands run in the workflow's folder, or its workdir:, whatever
// the current folder; -C changes folder first, as make's does.
func TestRunWorkdir(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"flows/here.yaml": "jobs:\n  - id: a\n    run: pwd > where.txt\n    outputs: [where.txt]\n",
		"flows/there.yaml": `workdir: ../work
jobs:
  - id: a
    run: pwd > where.txt && cp in.txt copy.txt
    inputs: [in.txt]
    outputs: [where.txt, copy.txt]
`,
		"work/in.txt": "input\n",
		"elsewhere/x": "",
	})
	check := func(name, wantDir string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(wantDir, "where.txt"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := strings.TrimSpace(string(b)); got != wantDir {
			t.Errorf("%s: the command ran in %s, want %s", name, got, wantDir)
		}
	}
	flows, work := filepath.Join(root, "flows"), filepath.Join(root, "work")
	if r := poolrun(t, filepath.Join(root, "elsewhere"), "run", "../flows/here.yaml"); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	check("from another folder", flows)
	if _, err := os.Stat(filepath.Join(root, "elsewhere", "where.txt")); err == nil {
		t.Error("the command wrote in the current folder")
	}
	os.Remove(filepath.Join(flows, "where.txt"))
	if r := poolrun(t, root, "run", "-C", "flows", "here.yaml"); r.code != 0 {
		t.Fatalf("-C: exit %d\n%s", r.code, r.stderr)
	}
	check("-C", flows)
	if r := poolrun(t, root, "run", "-C", "flows", "there.yaml"); r.code != 0 {
		t.Fatalf("workdir: exit %d\n%s", r.code, r.stderr)
	}
	check("workdir", work)
	if b, _ := os.ReadFile(filepath.Join(work, "copy.txt")); string(b) != "input\n" {
		t.Errorf("copy.txt: %q", b)
	}
	if _, err := os.Stat(filepath.Join(flows, ".there.yaml.poolrun-state")); err != nil {
		t.Errorf("the state file is not beside the workflow: %v", err)
	}
	r := poolrun(t, root, "run", "-n", "-v", "flows/there.yaml")
	if !strings.Contains(r.stdout, "skip  a  up to date") {
		t.Errorf("a second run does not find the outputs in the workdir:\n%s", r.stdout)
	}
}

// foreach over a glob of files: one job per file, with its path and stem.
func TestRunForeachFiles(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"wf/wf.yaml": `jobs:
  - id: count-${f.stem}
    foreach: {f: "data/*.csv"}
    run: mkdir -p out && wc -l < ${f} > out/${f.stem}.n
    inputs: ["${f}"]
    outputs: ["out/${f.stem}.n"]
`,
		"wf/data/a.csv": "1\n2\n",
		"wf/data/b.csv": "1\n2\n3\n",
		"wf/data/c.txt": "",
	})
	r := poolrun(t, dir, "run", "wf/wf.yaml")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for name, want := range map[string]string{"a": "2", "b": "3"} {
		b, err := os.ReadFile(filepath.Join(dir, "wf", "out", name+".n"))
		if err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("out/%s.n: %q, %v; want %s", name, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "wf", "out", "c.n")); err == nil {
		t.Error("c.txt matched data/*.csv")
	}
}

// Each mistake of the new kinds is refused before anything runs, with
// FILE:LINE where there is one, exit status 2.
func TestRunFlowBadInput(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		args []string // after "run"
		want string
	}{
		{"unknown target", "jobs:\n  - id: report\n    run: touch ran-report\n", []string{"wf.yaml", "reprot"},
			`poolrun run: unknown target "reprot": no job of wf.yaml has this id, nor makes this file; closest: report`},
		{"glob target matching none", "jobs:\n  - id: report\n    run: touch ran-report\n", []string{"wf.yaml", "x-*"},
			`poolrun run: unknown target "x-*": no job of wf.yaml matches it, nor makes a file it matches`},
		{"--set without =", "vars:\n  a: x\njobs:\n  - id: a\n    run: touch ran-a\n", []string{"--set", "a", "wf.yaml"},
			"--set a: want NAME=VALUE"},
		{"--set of a name the file has not", "vars:\n  sample: x\njobs:\n  - id: a\n    run: touch ran-a\n", []string{"--set", "sampel=y", "wf.yaml"},
			"wf.yaml: --set sampel: the workflow has no variable sampel"},
		{"glob matching nothing", "jobs:\n  - id: a-${f.stem}\n    foreach: {f: \"data/*.csv\"}\n    run: touch ran-a\n", []string{"wf.yaml"},
			`wf.yaml:3: job "a-${f.stem}": foreach variable "f": no file matches "data/*.csv"`},
		{"cycle through an inferred edge", "jobs:\n  - id: a\n    run: touch ran-a\n    inputs: [b.txt]\n    outputs: [a.txt]\n  - id: b\n    run: touch ran-b\n    outputs: [b.txt]\n    after: [a]\n", []string{"wf.yaml"},
			"wf.yaml:2: dependency cycle: a -> b (wf.yaml:6) -> a; a reads b.txt, an output of b"},
		{"no such workdir", "workdir: nowhere\njobs:\n  - id: a\n    run: touch ran-a\n", []string{"wf.yaml"},
			"wf.yaml:1: workdir "},
		{"no such -C folder", "jobs:\n  - id: a\n    run: touch ran-a\n", []string{"-C", "nowhere", "wf.yaml"},
			"poolrun run: -C nowhere: no such file or directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"wf.yaml": c.yaml})
			r := poolrun(t, dir, append([]string{"run"}, c.args...)...)
			if r.code != 2 {
				t.Errorf("exit %d, want 2", r.code)
			}
			if !strings.Contains(r.stderr, c.want) {
				t.Errorf("stderr %q does not contain %q", r.stderr, c.want)
			}
			if got := ranFiles(t, dir); len(got) > 0 {
				t.Errorf("jobs ran: %q", got)
			}
		})
	}
}

// examples/targets.yaml, run for the target summary, runs what summary
// needs and not the archive.
func TestRunTargetsExample(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("../../examples/targets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"targets.yaml": string(data)})
	r := poolrun(t, dir, "run", "-j", "2", "targets.yaml", "summary", "--set", "size=500")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	out := filepath.Join(dir, "poolrun-example-targets")
	if _, err := os.Stat(filepath.Join(out, "summary.txt")); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(out, "samples.tar.gz")); err == nil {
		t.Error("the archive was made, which summary does not need")
	}
	if !strings.Contains(r.stderr, "7 jobs: 7 succeeded;") {
		t.Errorf("summary:\n%s", r.stderr)
	}
}

// TestRunFileTarget: poolrun run FILE PATH runs only the job whose output
// PATH is, and what it needs, as make does with a file target.
func TestRunFileTarget(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"wf.yaml": `jobs:
  - id: split
    run: mkdir -p parts && echo x > parts/p
    outputs: [parts/]
  - id: count-${s}
    foreach: {s: [a, b]}
    run: mkdir -p counts && cat parts/p > counts/${s}.txt
    inputs: [parts/]
    outputs: ["counts/${s}.txt"]
`,
	})
	r := poolrun(t, dir, "run", "wf.yaml", "counts/b.txt")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "counts", "b.txt")); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "counts", "a.txt")); err == nil {
		t.Error("counts/a.txt was made: its job is not the target's")
	}
	if got := line(r.stderr, "2 jobs:"); !strings.HasPrefix(got, "2 succeeded") {
		t.Errorf("the account: %q, want 2 jobs (split, count-b)\n%s", got, r.stderr)
	}
	r = poolrun(t, dir, "run", "wf.yaml", "counts/c.txt")
	if want := `poolrun run: unknown target "counts/c.txt": no job of wf.yaml has this id, nor makes this file; closest outputs: counts/a.txt, counts/b.txt`; r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Errorf("an unknown file: exit %d, want 2 and %q\n%s", r.code, want, r.stderr)
	}
}
