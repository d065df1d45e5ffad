package workflow_test

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/internal/workflow"
)

// parseIn writes files (name -> content) into a fresh folder and parses
// the workflow text there, as wf.yaml, with opts.
func parseIn(t *testing.T, text string, opts workflow.Options, files ...string) (*workflow.Workflow, string, error) {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, "/") {
			continue
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "wf.yaml")
	w, err := workflow.ParseWith(file, yamlText(text), opts)
	return w, dir, err
}

// jobsOf maps each job's id to the job.
func jobsOf(w *workflow.Workflow) map[string]*workflow.Job {
	m := make(map[string]*workflow.Job, len(w.Jobs))
	for _, j := range w.Jobs {
		m[j.ID] = j
	}
	return m
}

func TestVars(t *testing.T) {
	const text = `
vars:
  ref: hg38
  n: "3"
items:
  idx:
    run: build ${ref} > "$POOLRUN_ITEM"
jobs:
  - id: align-${ref}-${i}
    foreach: {i: "1..${n}"}
    run: align --ref ${ref} --part ${i} $HOME ${HOME}
    inputs: ["in/${ref}.fa"]
    outputs: ["out/${ref}-${i}.bam"]
    needs: [idx]
  - id: merge
    run: merge ${ref}
    after: ["align-${ref}-*"]
`
	tests := []struct {
		name string
		set  map[string]string
		ids  []string
		run  string // of merge
		item string
	}{
		{"vars alone", nil, []string{"align-hg38-1", "align-hg38-2", "align-hg38-3", "merge"}, "merge hg38", "build hg38 > \"$POOLRUN_ITEM\""},
		{"--set over vars", map[string]string{"ref": "t2t", "n": "1"}, []string{"align-t2t-1", "merge"}, "merge t2t", "build t2t > \"$POOLRUN_ITEM\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := workflow.ParseWith("wf.yaml", yamlText(text), workflow.Options{Set: tt.set})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, j := range w.Jobs {
				ids = append(ids, j.ID)
			}
			if !slices.Equal(ids, tt.ids) {
				t.Errorf("ids %q, want %q", ids, tt.ids)
			}
			jobs := jobsOf(w)
			if got := jobs["merge"].Run; got != tt.run {
				t.Errorf("merge runs %q, want %q", got, tt.run)
			}
			if got := w.Items[0].Run; got != tt.item {
				t.Errorf("item runs %q, want %q", got, tt.item)
			}
			first := jobs[tt.ids[0]]
			if !strings.HasSuffix(first.Run, " $HOME ${HOME}") {
				t.Errorf("shell variables not left alone: %q", first.Run)
			}
			if want := map[string]string{"i": "1"}; !maps.Equal(first.Vars(), want) {
				t.Errorf("Vars %v, want only the foreach variable %v", first.Vars(), want)
			}
		})
	}
}

func TestVarsSetUsedNotDeclared(t *testing.T) {
	const text = "jobs:\n  - id: a\n    run: echo ${who}\n"
	if _, err := workflow.Parse("wf.yaml", []byte(text)); err == nil || !strings.Contains(err.Error(), "unknown variable ${who}") {
		t.Fatalf("without --set: %v, want unknown variable", err)
	}
	w, err := workflow.ParseWith("wf.yaml", []byte(text), workflow.Options{Set: map[string]string{"who": "me"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Jobs[0].Run; got != "echo me" {
		t.Errorf("run %q", got)
	}
}

func TestVarsErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		set  map[string]string
		want string
	}{
		{"clash with foreach", "vars:\n  i: x\njobs:\n  - id: a-${i}\n    foreach: {i: 1..2}\n    run: x\n", nil,
			`wf.yaml:5: job "a-${i}": foreach variable "i" is also a variable of vars: (line 2): rename one`},
		{"clash of --set with foreach", "jobs:\n  - id: a-${i}\n    foreach: {i: 1..2}\n    run: x ${i}\n", map[string]string{"i": "3"},
			`wf.yaml:3: job "a-${i}": foreach variable "i" is also a variable of --set: rename one`},
		{"--set of an unknown name", "vars:\n  sample: a\njobs:\n  - id: a\n    run: x ${sample}\n", map[string]string{"sampel": "b"},
			`wf.yaml: --set sampel: the workflow has no variable sampel: it is neither in vars: nor used as ${sampel} (vars: defines sample)`},
		{"--set of a bad name", "jobs:\n  - id: a\n    run: x\n", map[string]string{"Bad": "b"},
			`wf.yaml: --set Bad: not a valid variable name`},
		{"vars not a mapping", "vars: [a]\njobs:\n  - id: a\n    run: x\n", nil, `wf.yaml:1: vars must map variable names to values, not a list`},
		{"bad var name", "vars:\n  Big: x\njobs:\n  - id: a\n    run: x\n", nil, `wf.yaml:2: vars: variable "Big" is not valid`},
		{"var not a string", "vars:\n  a: [x]\njobs:\n  - id: a\n    run: x\n", nil, `wf.yaml:2: vars: variable "a" must be a string, not a list`},
		{"unknown var in a range", "jobs:\n  - id: a-${i}\n    foreach: {i: \"1..${n}\"}\n    run: x\n", nil,
			`wf.yaml:3: job "a-${i}": foreach variable "i": unknown variable ${n} (the workflow has no vars:)`},
		{"unknown var in run names the vars", "vars:\n  ref: x\njobs:\n  - id: a\n    run: x ${rfe}\n", nil,
			`wf.yaml:5: job "a": run: unknown variable ${rfe} (the job has no foreach) (vars: defines ref); for a shell variable write $rfe or $${rfe}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := workflow.ParseWith("wf.yaml", []byte(tt.in), workflow.Options{Set: tt.set})
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error\n got: %v\nwant: %s", err, tt.want)
			}
		})
	}
}

func TestForeachFiles(t *testing.T) {
	const text = `
vars:
  data: data
jobs:
  - id: count-${f.stem}
    foreach: {f: "${data}/*.csv"}
    run: wc -l ${f} > out/${f.stem}.n; echo ${f.name} in ${f.dir}
    inputs: ["${f}"]
    outputs: ["out/${f.stem}.n"]
`
	w, _, err := parseIn(t, text, workflow.Options{}, "data/b.csv", "data/a.csv", "data/.hidden.csv", "data/c.txt", "data/d.tar.csv", "out/")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range w.Jobs {
		got = append(got, j.ID+": "+j.Run)
	}
	want := []string{
		"count-a: wc -l data/a.csv > out/a.n; echo a.csv in data",
		"count-b: wc -l data/b.csv > out/b.n; echo b.csv in data",
		"count-d.tar: wc -l data/d.tar.csv > out/d.tar.n; echo d.tar.csv in data",
	}
	if !slices.Equal(got, want) {
		t.Errorf("jobs\n got: %q\nwant: %q", got, want)
	}
	if v := w.Jobs[0].Vars(); !maps.Equal(v, map[string]string{"f": "data/a.csv"}) {
		t.Errorf("Vars %v", v)
	}

	// A list value is no glob, a glob matching nothing is an error, and a
	// stem is for variables only.
	if _, _, err := parseIn(t, "jobs:\n  - id: a\n    foreach: {f: [x/a*.csv]}\n    run: x ${f}\n", workflow.Options{}); err != nil {
		t.Errorf("a list value: %v", err)
	}
	_, dir, err := parseIn(t, "jobs:\n  - id: a-${f.stem}\n    foreach:\n      f: \"data/*.csv\"\n    run: x\n", workflow.Options{}, "data/")
	if want := `wf.yaml:4: job "a-${f.stem}": foreach variable "f": no file matches "data/*.csv" in ` + dir; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("no match: %v, want %s", err, want)
	}
	if _, err := workflow.Parse("wf.yaml", []byte("jobs:\n  - id: a\n    run: x ${a.stem}\n")); err == nil || !strings.Contains(err.Error(), "unknown variable ${a.stem}") {
		t.Errorf("stem of no variable: %v", err)
	}
	if _, err := workflow.Parse("wf.yaml", []byte("jobs:\n  - id: a-${i}\n    foreach: {i: [a]}\n    run: x ${i.size}\n")); err != nil {
		t.Errorf("${i.size} is the shell's, not a variable's: %v", err)
	}
}

func TestWorkdir(t *testing.T) {
	const text = `
workdir: ../work
jobs:
  - id: a
    run: x
    outputs: [out.txt, "sub/*.txt"]
`
	root := t.TempDir()
	for _, d := range []string{"wf", "work"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "wf", "wf.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := workflow.Parse(filepath.Join(root, "wf", "wf.yaml"), yamlText(text))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "work"); w.Dir != want {
		t.Errorf("Dir %s, want %s", w.Dir, want)
	}
	w, err = workflow.Parse(filepath.Join(root, "wf", "wf.yaml"), []byte("jobs:\n  - id: a\n    run: x\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "wf"); w.Dir != want {
		t.Errorf("Dir without workdir %s, want the file's folder %s", w.Dir, want)
	}

	tests := []struct {
		name, in, want string
	}{
		{"no such folder", "workdir: nowhere\njobs:\n  - id: a\n    run: x\n", "wf.yaml:1: workdir {ROOT}/wf/nowhere: no such file or directory"},
		{"a file", "workdir: wf.yaml\njobs:\n  - id: a\n    run: x\n", "wf.yaml:1: workdir {ROOT}/wf/wf.yaml is not a folder"},
		{"output outside the workdir", "workdir: ../work\njobs:\n  - id: a\n    run: x\n    outputs: [../wf/x]\n",
			`wf.yaml:5: job "a": outputs "../wf/x": it is {ROOT}/wf/x, outside the workflow's workdir {ROOT}/work: outputs must lie inside it`},
		{"output matching the workflow file from above", "workdir: ..\njobs:\n  - id: a\n    run: x\n    outputs: [\"*/*.yaml\"]\n",
			`wf.yaml:5: job "a": outputs "*/*.yaml": it would match the workflow file wf.yaml`},
		{"output matching the state file from above", "workdir: ..\njobs:\n  - id: a\n    run: x\n    outputs: [\"wf/.wf.yaml.*\"]\n",
			`wf.yaml:5: job "a": outputs "wf/.wf.yaml.*": it would match the workflow's state file .wf.yaml.poolrun-state`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := workflow.Parse(filepath.Join(root, "wf", "wf.yaml"), []byte(tt.in))
			want := strings.ReplaceAll(tt.want, "{ROOT}", root)
			if err == nil || !strings.HasSuffix(err.Error(), want) {
				t.Errorf("error\n got: %v\nwant: %s", err, want)
			}
		})
	}
	// Outputs below the workdir that do not reach the workflow's own
	// files are fine, even when the workdir holds the workflow's folder.
	if _, err := workflow.Parse(filepath.Join(root, "wf", "wf.yaml"), []byte("workdir: ..\njobs:\n  - id: a\n    run: x\n    outputs: [\"work/*.yaml\", \"wf/out/*\"]\n")); err != nil {
		t.Error(err)
	}
}

func TestInferredDependencies(t *testing.T) {
	const text = `
jobs:
  - id: report
    run: x
    inputs: ["parts/*.txt", summary.txt]
  - id: part-${i}
    foreach: {i: 1..2}
    run: x
    inputs: [./raw/../raw.csv]
    outputs: ["parts/${i}.txt"]
  - id: clean
    run: x
    inputs: [raw.csv]
    outputs: [raw.csv]
  - id: summarise
    run: x
    inputs: [parts/1.txt]
    outputs: ["sum-*.txt"]
    after: [part-1]
`
	w, _, err := parseIn(t, text, workflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	jobs := jobsOf(w)
	tests := []struct {
		id       string
		after    []string
		inferred map[string]string
	}{
		// The output pattern sum-*.txt of summarise is matched with nothing.
		{"report", []string{"part-1", "part-2"}, map[string]string{"part-1": "parts/*.txt", "part-2": "parts/*.txt"}},
		{"part-1", []string{"clean"}, map[string]string{"clean": "./raw/../raw.csv"}},
		{"clean", nil, nil}, // reads its own output
		{"summarise", []string{"part-1"}, nil},
	}
	for _, tt := range tests {
		j := jobs[tt.id]
		if !slices.Equal(j.After, tt.after) {
			t.Errorf("%s runs after %q, want %q", tt.id, j.After, tt.after)
		}
		if !maps.Equal(j.Inferred, tt.inferred) {
			t.Errorf("%s: Inferred %v, want %v", tt.id, j.Inferred, tt.inferred)
		}
	}
	checkOrder(t, w)
	if w.Jobs[len(w.Jobs)-1].ID != "report" && w.Jobs[len(w.Jobs)-2].ID != "report" {
		t.Errorf("report is not placed after the parts: %v", w.Jobs)
	}
}

func TestInferredCycle(t *testing.T) {
	const text = `
jobs:
  - id: a
    run: x
    inputs: [b.txt]
    outputs: [a.txt]
  - id: b
    run: x
    outputs: [b.txt]
    after: [a]
`
	_, err := workflow.Parse("wf.yaml", yamlText(text))
	const want = "wf.yaml:2: dependency cycle: a -> b (wf.yaml:6) -> a; a reads b.txt, an output of b"
	if err == nil || err.Error() != want {
		t.Errorf("error\n got: %v\nwant: %s", err, want)
	}
}

func TestSelect(t *testing.T) {
	const text = `
items:
  ref: {run: x}
  other: {run: x}
jobs:
  - id: prep
    run: x
    outputs: [prep.txt]
  - id: align-${i}
    foreach: {i: 1..3}
    run: x
    inputs: [prep.txt]
    needs: [ref]
  - id: merge
    run: x
    after: ["align-*"]
  - id: report
    run: x
    after: [merge]
  - id: unrelated
    run: x
    needs: [other]
`
	w, err := workflow.Parse("wf.yaml", yamlText(text))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		targets []string
		want    []string
		items   []string
	}{
		{[]string{"merge"}, []string{"prep", "align-1", "align-2", "align-3", "merge"}, []string{"ref"}},
		{[]string{"align-2"}, []string{"prep", "align-2"}, []string{"ref"}},
		{[]string{"align-[12]", "unrelated"}, []string{"prep", "align-1", "align-2", "unrelated"}, []string{"ref", "other"}},
		{[]string{"prep"}, []string{"prep"}, nil},
	}
	for _, tt := range tests {
		sel, err := w.Select(tt.targets)
		if err != nil {
			t.Errorf("%q: %v", tt.targets, err)
			continue
		}
		var ids, items []string
		for _, j := range sel.Jobs {
			ids = append(ids, j.ID)
		}
		for _, it := range sel.Items {
			items = append(items, it.Name)
		}
		if !slices.Equal(ids, tt.want) || !slices.Equal(items, tt.items) {
			t.Errorf("%q: jobs %q, items %q; want %q, %q", tt.targets, ids, items, tt.want, tt.items)
		}
	}
	if sel, err := w.Select(nil); err != nil || sel != w {
		t.Errorf("no targets: %v, %v", sel, err)
	}
	if len(w.Jobs) != 7 {
		t.Errorf("Select changed the workflow: %d jobs", len(w.Jobs))
	}

	_, err = w.Select([]string{"mrege", "report", "align-9", "zzz*", "[x"})
	if !errors.Is(err, workflow.ErrUnknownTarget) {
		t.Fatalf("unknown targets: %v", err)
	}
	want := []string{
		`unknown target "mrege": no job of wf.yaml has this id, nor makes this file; closest: merge`,
		`unknown target "align-9": no job of wf.yaml has this id, nor makes this file; closest: align-1, align-2, align-3`,
		`unknown target "zzz*": no job of wf.yaml matches it, nor makes a file it matches`,
		`unknown target "[x": not a valid pattern`,
	}
	if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, want) {
		t.Errorf("error\n got: %q\nwant: %q", got, want)
	}
}

// TestSelectFiles: a target that is no job's id names the jobs that make
// it, a path or a glob, with what they need; an unknown file names the
// outputs closest to it.
func TestSelectFiles(t *testing.T) {
	w, err := workflow.Parse("wf.yaml", []byte(`
jobs:
  - id: split
    run: ./split
    outputs: [parts/]
  - id: count-${s}
    foreach: {s: [a, b, c]}
    run: ./count ${s}
    inputs: [parts/]
    outputs: ["counts/${s}.txt"]
  - id: plots
    run: ./plot
    outputs: ["plots/*.png"]
  - id: sum
    run: ./sum
    inputs: ["counts/*.txt"]
    outputs: [total.txt]
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		targets []string
		want    []string
	}{
		{[]string{"counts/b.txt"}, []string{"split", "count-b"}},
		{[]string{"./counts/b.txt"}, []string{"split", "count-b"}},
		{[]string{"counts/*.txt"}, []string{"split", "count-a", "count-b", "count-c"}},
		{[]string{"counts"}, []string{"split", "count-a", "count-b", "count-c"}},
		{[]string{"plots/x.png"}, []string{"plots"}},
		{[]string{"parts/p1"}, []string{"split"}},
		{[]string{"total.txt", "plots/*"}, []string{"split", "count-a", "count-b", "count-c", "plots", "sum"}},
		{[]string{filepath.Join(w.Dir, "counts", "a.txt")}, []string{"split", "count-a"}},
	} {
		sel, err := w.Select(tt.targets)
		if err != nil {
			t.Errorf("%q: %v", tt.targets, err)
			continue
		}
		var ids []string
		for _, j := range sel.Jobs {
			ids = append(ids, j.ID)
		}
		if !slices.Equal(ids, tt.want) {
			t.Errorf("%q: jobs %q, want %q", tt.targets, ids, tt.want)
		}
	}
	_, err = w.Select([]string{"counts/d.txt", "totl.txt"})
	want := []string{
		`unknown target "counts/d.txt": no job of wf.yaml has this id, nor makes this file; closest outputs: counts/a.txt, counts/b.txt, counts/c.txt`,
		`unknown target "totl.txt": no job of wf.yaml has this id, nor makes this file; closest outputs: total.txt`,
	}
	if err == nil || !slices.Equal(strings.Split(err.Error(), "\n"), want) {
		t.Errorf("unknown files: %v\nwant: %q", err, want)
	}
}
