package workflow_test

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/regfile"
	"github.com/poolrun/poolrun/internal/workflow"
)

// describe writes a job on one line: "LINE ID: RUN [timeout D] [after A,B]
// [needs X] [VARS]", with Vars sorted by name.
func describe(j *workflow.Job) string {
	s := strconv.Itoa(j.Line) + " " + j.ID + ": " + j.Run
	if j.Timeout != 0 {
		s += " [timeout " + j.Timeout.String() + "]"
	}
	if j.After != nil {
		s += " [after " + strings.Join(j.After, ",") + "]"
	}
	if j.Needs != nil {
		s += " [needs " + strings.Join(j.Needs, ",") + "]"
	}
	if j.Vars() != nil {
		var vs []string
		for k, v := range j.Vars() {
			vs = append(vs, k+"="+v)
		}
		slices.Sort(vs)
		s += " [" + strings.Join(vs, " ") + "]"
	}
	return s
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string // describe of every job, in order
	}{
		{name: "plain jobs and dependencies", in: `
jobs:
  - id: split
    run: ./split input
  - id: align
    run: ./align --ref "$POOLRUN_ITEM_REF"
    after: [split]
  - id: report
    run: ./report
    after: split
`, want: []string{
			`2 split: ./split input`,
			`4 align: ./align --ref "$POOLRUN_ITEM_REF" [after split]`,
			`7 report: ./report [after split]`,
		}},
		{name: "range", in: `
jobs:
  - id: chunk-${i}
    foreach: {i: 1..3}
    run: ./work --chunk ${i}
`, want: []string{
			`2 chunk-1: ./work --chunk 1 [i=1]`,
			`2 chunk-2: ./work --chunk 2 [i=2]`,
			`2 chunk-3: ./work --chunk 3 [i=3]`,
		}},
		{name: "padded and negative ranges", in: `
jobs:
  - id: p${i}
    foreach: {i: "08..10"}
    run: x
  - id: n${i}
    foreach: {i: -1..1}
    run: x
  - id: m${i}
    foreach: {i: -01..1}
    run: x
`, want: []string{
			`2 p08: x [i=08]`, `2 p09: x [i=09]`, `2 p10: x [i=10]`,
			`5 n-1: x [i=-1]`, `5 n0: x [i=0]`, `5 n1: x [i=1]`,
			`8 m-01: x [i=-01]`, `8 m000: x [i=000]`, `8 m001: x [i=001]`,
		}},
		{name: "several variables: nested loops, first outermost", in: `
jobs:
  - id: sample-${s}-${k}
    foreach: {s: [a, b], k: "0..2"}
    run: ./sample ${s} ${k}
`, want: []string{
			`2 sample-a-0: ./sample a 0 [k=0 s=a]`,
			`2 sample-a-1: ./sample a 1 [k=1 s=a]`,
			`2 sample-a-2: ./sample a 2 [k=2 s=a]`,
			`2 sample-b-0: ./sample b 0 [k=0 s=b]`,
			`2 sample-b-1: ./sample b 1 [k=1 s=b]`,
			`2 sample-b-2: ./sample b 2 [k=2 s=b]`,
		}},
		{name: "list values are taken as written", in: `
jobs:
  - id: v-${x}
    foreach:
      x: [007, 1.50, true, "q"]
    run: echo ${x}
`, want: []string{
			`2 v-007: echo 007 [x=007]`,
			`2 v-1.50: echo 1.50 [x=1.50]`,
			`2 v-true: echo true [x=true]`,
			`2 v-q: echo q [x=q]`,
		}},
		{name: "substitution in after and needs", in: `
items:
  ref-a: {run: x}
  ref-b: {run: x}
jobs:
  - id: split-${s}
    foreach: {s: [a, b]}
    run: ./split ${s}
  - id: align-${s}
    foreach: {s: [a, b]}
    run: ./align "$POOLRUN_ITEM_REF_${s:raw}"  # the value makes a name: shell text
    after: ["split-${s}"]
    needs:
      - ref-${s}
`, want: []string{
			`5 split-a: ./split a [s=a]`,
			`5 split-b: ./split b [s=b]`,
			`8 align-a: ./align "$POOLRUN_ITEM_REF_a" [after split-a] [needs ref-a] [s=a]`,
			`8 align-b: ./align "$POOLRUN_ITEM_REF_b" [after split-b] [needs ref-b] [s=b]`,
		}},
		{name: "the shell keeps its own dollars", in: `
jobs:
  - id: j-${i}
    foreach: {i: [1]}
    run: echo $i ${i} $${i} ${HOME} ${_x} ${i:-d} $$ $$$${i} ${POOLRUN_ITEM_REF}
`, want: []string{
			`2 j-1: echo $i 1 ${i} ${HOME} ${_x} ${i:-d} $$ $$${i} ${POOLRUN_ITEM_REF} [i=1]`,
		}},
		{name: "values are not scanned again", in: `
jobs:
  - id: j-${i}
    foreach: {i: [a], v: ["${i}"]}
    run: echo ${v}
`, want: []string{
			// Neither poolrun nor the shell reads ${i} in the value.
			`2 j-a: echo '${i}' [i=a v=${i}]`,
		}},
		{name: "glob after: file order, no duplicates, never itself", in: `
jobs:
  - id: chunk-${i}
    foreach: {i: 1..3}
    run: x
  - id: chunk-extra
    run: x
  - id: chunk-merge
    run: x
    after: [chunk-3, "chunk-*", chunk-1, "chunk-?"]
  - id: last
    run: x
    after: ["chunk-[23]", "*-merge"]
`, want: []string{
			`2 chunk-1: x [i=1]`,
			`2 chunk-2: x [i=2]`,
			`2 chunk-3: x [i=3]`,
			`5 chunk-extra: x`,
			`7 chunk-merge: x [after chunk-1,chunk-2,chunk-3,chunk-extra]`,
			`10 last: x [after chunk-2,chunk-3,chunk-merge]`,
		}},
		{name: "globs with a fixed end", in: `
jobs:
  - id: a-${i}
    foreach: {i: [1, 11, 21]}
    run: x
  - id: b-1
    run: x
  - id: c
    run: x
    after: ["*-1", "*1"]
  - id: d
    run: x
    after: ["?-1?", "*[2]*"]
`, want: []string{
			`2 a-1: x [i=1]`,
			`2 a-11: x [i=11]`,
			`2 a-21: x [i=21]`,
			`5 b-1: x`,
			`7 c: x [after a-1,a-11,a-21,b-1]`,
			`10 d: x [after a-11,a-21]`,
		}},
		{name: "a glob matches ids with slashes only through them", in: `
jobs:
  - id: a/x
    run: x
  - id: a/y/z
    run: x
  - id: b
    run: x
    after: ["a/*"]
`, want: []string{
			`2 a/x: x`,
			`4 a/y/z: x`,
			`6 b: x [after a/x]`,
		}},
		{name: "a job moves below the jobs it runs after, as little as needed", in: `
jobs:
  - id: report
    run: x
    after: [merge]
  - id: first
    run: x
  - id: merge
    run: x
    after: [work-*]
  - id: work-${i}
    foreach: {i: 1..2}
    run: x
  - id: other
    run: x
`, want: []string{
			`5 first: x`,
			`10 work-1: x [i=1]`,
			`10 work-2: x [i=2]`,
			`7 merge: x [after work-1,work-2]`,
			`2 report: x [after merge]`,
			`13 other: x`,
		}},
		{name: "needs without duplicates, in the order written", in: `
items:
  b: {run: x}
  a: {run: x}
jobs:
  - id: j
    run: x
    needs: [a, b, a]
`, want: []string{
			`5 j: x [needs a,b]`,
		}},
		{name: "anchors and aliases", in: `
items:
  ref: {run: x}
jobs:
  - id: a
    run: &cmd ./work --all
    needs: &refs [ref]
  - id: b
    run: *cmd
    needs: *refs
    after: a
`, want: []string{
			`4 a: ./work --all [needs ref]`,
			`7 b: ./work --all [after a] [needs ref]`,
		}},
		{name: "multi-line run", in: `
jobs:
  - id: a
    run: |
      set -e
      echo "$POOLRUN_ITEM"
`, want: []string{
			"2 a: set -e\necho \"$POOLRUN_ITEM\"\n",
		}},
		{name: "timeouts", in: `
jobs:
  - id: a
    run: x
    timeout: 90s
  - id: b-${i}
    foreach: {i: 1..2}
    run: x
    timeout: 1h2m3.5s
  - id: c
    run: x
    timeout: &t "250ms"
  - {id: d, run: x, timeout: *t}
  - {id: e, run: x}
`, want: []string{
			`2 a: x [timeout 1m30s]`,
			`5 b-1: x [timeout 1h2m3.5s] [i=1]`,
			`5 b-2: x [timeout 1h2m3.5s] [i=2]`,
			`9 c: x [timeout 250ms]`,
			`12 d: x [timeout 250ms]`,
			`13 e: x`,
		}},
		{name: "explicit document markers", in: `
---
jobs:
  - {id: a, run: x}
...
`, want: []string{
			`3 a: x`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := workflow.Parse("wf.yaml", yamlText(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, j := range w.Jobs {
				got = append(got, describe(j))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("jobs\n got: %q\nwant: %q", got, tt.want)
			}
			checkOrder(t, w)
		})
	}
}

// checkOrder checks that every job comes after the jobs it runs after.
func checkOrder(t *testing.T, w *workflow.Workflow) {
	t.Helper()
	seen := make(map[string]bool)
	for _, j := range w.Jobs {
		for _, a := range j.After {
			if !seen[a] {
				t.Errorf("job %q comes before %q, which it runs after", j.ID, a)
			}
		}
		seen[j.ID] = true
	}
}

func TestParseItems(t *testing.T) {
	in := yamlText(`
items:
  ref:
    run: zcat ref.gz > "$POOLRUN_ITEM"
  Index.2: {run: 'sort -u words > "${POOLRUN_ITEM}" $${HOME}'}
jobs:
  - {id: a, run: x, needs: [ref, Index.2]}
`)
	w, err := workflow.Parse("items.yaml", in)
	if err != nil {
		t.Fatal(err)
	}
	want := []*workflow.Item{
		{Name: "ref", Run: `zcat ref.gz > "$POOLRUN_ITEM"`, Line: 2},
		{Name: "Index.2", Run: `sort -u words > "${POOLRUN_ITEM}" ${HOME}`, Line: 4},
	}
	if !reflect.DeepEqual(w.Items, want) {
		t.Errorf("Items = %+v, want %+v", w.Items, want)
	}
	if w.File != "items.yaml" {
		t.Errorf("File = %q", w.File)
	}
	if it := w.ItemByName("Index.2"); it != w.Items[1] {
		t.Errorf("ItemByName(Index.2) = %v", it)
	}
	if it := w.ItemByName("index.2"); it != nil {
		t.Errorf("ItemByName(index.2) = %v, want nil", it)
	}
	if it := (&workflow.Workflow{}).ItemByName("ref"); it != nil {
		t.Errorf("zero Workflow: ItemByName = %v, want nil", it)
	}
}

func TestEnvName(t *testing.T) {
	tests := []struct{ name, item, want string }{
		{name: "lower case", item: "ref", want: "POOLRUN_ITEM_REF"},
		{name: "punctuation", item: "ref-2.gz", want: "POOLRUN_ITEM_REF_2_GZ"},
		{name: "mixed case", item: "Idx_a", want: "POOLRUN_ITEM_IDX_A"},
		{name: "non-ASCII is one underscore per character", item: "ré", want: "POOLRUN_ITEM_R_"},
		{name: "empty", item: "", want: "POOLRUN_ITEM_"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := workflow.EnvName(tt.item); got != tt.want {
				t.Errorf("EnvName(%q) = %q, want %q", tt.item, got, tt.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("jobs:\n  - {id: a, run: 'true'}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := workflow.Load(good)
	if err != nil {
		t.Fatal(err)
	}
	if w.File != good || len(w.Jobs) != 1 || w.Jobs[0].Run != "true" {
		t.Errorf("Load = %+v", w)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("jobs:\n  - {id: a}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = workflow.Load(bad)
	if want := bad + `:2: job "a" has no run command`; err == nil || err.Error() != want {
		t.Errorf("Load(bad) error = %v, want %s", err, want)
	}

	_, err = workflow.Load(filepath.Join(dir, "missing.yaml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) error = %v, want fs.ErrNotExist", err)
	}
	var werr *workflow.Error
	if errors.As(err, &werr) {
		t.Errorf("Load(missing) error is a *workflow.Error: %v", err)
	}
}

func TestErrorWithoutLine(t *testing.T) {
	e := &workflow.Error{File: "x.yaml", Msg: "m"}
	if got := e.Error(); got != "x.yaml: m" {
		t.Errorf("Error() = %q", got)
	}
}

// TestMaxJobs parses a workflow of as many jobs as the limit allows (the
// tests lower it: export_test.go).
func TestMaxJobs(t *testing.T) {
	const most = 100_000 // the tests' limit
	in := "jobs:\n  - id: a-${i}\n    foreach: {i: 2.." + strconv.Itoa(most) + "}\n    run: x\n" +
		"  - {id: last, run: x, after: ['a-*']}\n"
	w, err := workflow.Parse("big.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Jobs) != most {
		t.Fatalf("%d jobs", len(w.Jobs))
	}
	if last := w.Jobs[len(w.Jobs)-1]; last.ID != "last" || len(last.After) != most-1 {
		t.Errorf("last job %q runs after %d jobs", last.ID, len(last.After))
	}
	if _, err := workflow.Parse("big.yaml", []byte(strings.Replace(in, "id: last", "id: more", 1)+"  - {id: last, run: x}\n")); err == nil || !strings.Contains(err.Error(), "more than 100000 jobs") {
		t.Errorf("one job more: %v, want the limit's error", err)
	}
}

func TestMaxDependencies(t *testing.T) {
	in := "jobs:\n  - id: a-${i}\n    foreach: {i: 1..1001}\n    run: x\n" +
		"  - id: b-${i}\n    foreach: {i: 1..1000}\n    run: x\n    after: ['a-*']\n"
	_, err := workflow.Parse("deps.yaml", []byte(in))
	want := `deps.yaml:8: job "b-1000": the workflow has more than 1000000 dependencies`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

func TestPatternBudget(t *testing.T) {
	// 3000 patterns without a fixed start or end, each tried on 23000 ids.
	in := "jobs:\n  - id: a-${i}\n    foreach: {i: 1..20000}\n    run: x\n" +
		"  - id: b-${i}\n    foreach: {i: 1..3000}\n    run: x\n    after: ['*-${i}*']\n"
	_, err := workflow.Parse("p.yaml", []byte(in))
	want := `p.yaml:8: job "b-218": after "*-218*": the patterns of this workflow take too long to match; give them a fixed start or end, as in "chunk-*"`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}

	// The same number of patterns with a fixed end is quick.
	in = strings.Replace(in, "'*-${i}*'", "'*-${i}'", 1)
	w, err := workflow.Parse("p.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if j := w.Jobs[len(w.Jobs)-1]; j.ID != "b-3000" || !slices.Equal(j.After, []string{"a-3000"}) {
		t.Errorf("last job %s runs after %q", j.ID, j.After)
	}
}

func TestSizeLimits(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{
			name: "a long needs list repeated by an alias and foreach",
			in: "items:\n  a: {run: x}\njobs:\n  - {id: first, run: x, needs: &l [" + strings.Repeat("a, ", 20) + "a]}\n" +
				"  - id: j-${i}\n    foreach: {i: 1..50000}\n    run: x\n    needs: *l\n",
			want: `size.yaml:5: job "j-${i}": the workflow has more than 1000000 dependencies`,
		},
		{
			name: "a long command repeated by foreach",
			in:   "jobs:\n  - id: j-${i}\n    foreach: {i: 1..100000}\n    run: echo " + strings.Repeat("x", 3000) + "\n",
			want: `size.yaml:2: job "j-${i}": the workflow's ids, commands and paths come to more than 256 MiB`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := workflow.Parse("size.yaml", []byte(tt.in))
			if err == nil || err.Error() != tt.want {
				t.Errorf("error = %v, want %s", err, tt.want)
			}
		})
	}
}

// Load refuses a file over MaxFileSize with an error that names the file,
// its size and the limit, and an endless device at once as not a regular
// file; a file of exactly MaxFileSize bytes is read (and here fails to
// parse, as a YAML error).
func TestLoadTooLarge(t *testing.T) {
	dir := t.TempDir()
	at := filepath.Join(dir, "at-limit.yaml")
	over := filepath.Join(dir, "over-limit.yaml")
	for path, size := range map[string]int64{at: workflow.MaxFileSize, over: workflow.MaxFileSize + 1} {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		// A comment line, then NUL bytes (sparse on disk): not a workflow.
		f.WriteString("# big\n")
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	for _, tt := range []struct {
		name, path string
		tooLarge   bool
	}{
		{"at the limit", at, false},
		{"over the limit", over, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := workflow.Load(tt.path)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			if got := errors.Is(err, regfile.ErrTooLarge); got != tt.tooLarge {
				t.Fatalf("Load(%s) = %v; errors.Is(err, regfile.ErrTooLarge) = %v, want %v", tt.path, err, got, tt.tooLarge)
			}
			if tt.tooLarge && (!strings.HasPrefix(err.Error(), tt.path+": ") || !strings.Contains(err.Error(), "16 MiB") || !strings.Contains(err.Error(), "16777217 bytes")) {
				t.Errorf("error %q does not name the file, its size and the limit", err)
			}
		})
	}
	t.Run("endless", func(t *testing.T) {
		_, err := workflow.Load("/dev/zero")
		if !errors.Is(err, regfile.ErrNotRegular) || errors.Is(err, regfile.ErrTooLarge) || err.Error() != "/dev/zero: is a device, not a regular file" {
			t.Errorf("Load(/dev/zero) = %v; want it refused as a device", err)
		}
	})
}

// Load refuses at once what is not a regular file, naming it and saying
// what it is: a FIFO that no writer opens (with what to do instead), a
// directory.
func TestLoadNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "wf.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
	for _, tt := range []struct {
		path, want string
	}{
		{fifo, fifo + ": is a named pipe (FIFO), not a regular file; write the workflow to a file first, and give that file"},
		{dir, dir + ": is a directory, not a regular file"},
	} {
		done := make(chan error, 1)
		go func() {
			_, err := workflow.Load(tt.path)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, regfile.ErrNotRegular) || err.Error() != tt.want {
				t.Errorf("Load(%s) = %v; want %q", tt.path, err, tt.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Load(%s) did not return within 10s", tt.path)
		}
	}
}

func TestParseRetriesAndResources(t *testing.T) {
	wf, err := workflow.Parse("wf.yaml", []byte(`
jobs:
  - id: a-${i}
    foreach: {i: 1..2}
    run: x
    retries: 2
    retry_delay: 1.5s
    threads: 4
    mem: 1.5GiB
  - id: b
    run: x
    retries: 0
  - id: c
    run: x
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range wf.Jobs[:2] {
		if j.Retries == nil || *j.Retries != 2 || j.RetryDelay != 1500*time.Millisecond || j.Threads != 4 || j.Mem != 3<<29 {
			t.Errorf("%s: retries %v, delay %v, threads %d, mem %d", j.ID, j.Retries, j.RetryDelay, j.Threads, j.Mem)
		}
	}
	if b := wf.Jobs[2]; b.Retries == nil || *b.Retries != 0 {
		t.Errorf("b: retries %v, want 0 (given)", b.Retries)
	}
	if c := wf.Jobs[3]; c.Retries != nil || c.RetryDelay != 0 || c.Threads != 0 || c.Mem != 0 {
		t.Errorf("c: %+v, want none of the fields", c)
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1024", 1024, true},
		{"512M", 512 << 20, true},
		{"512MB", 512 << 20, true},
		{"512mib", 512 << 20, true},
		{"2G", 2 << 30, true},
		{"1.5GiB", 3 << 29, true},
		{"1 T", 1 << 40, true},
		{"4k", 4096, true},
		{"0", 0, true},
		{"1.5", 0, false},
		{"", 0, false},
		{"G", 0, false},
		{"-1", 0, false},
		{"2X", 0, false},
		{"1.2.3M", 0, false},
		{"8192P", 0, false},
		{"9000000T", 0, false},
	} {
		got, err := workflow.ParseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// A job's resources field and the workflow's: named amounts, shared by
// the jobs of a foreach entry.
func TestParseNamedResources(t *testing.T) {
	wf, err := workflow.Parse("wf.yaml", []byte(`
resources: {gpu: 2, licence: 0}
jobs:
  - id: a-${i}
    foreach: {i: [1, 2]}
    run: x
    resources: {gpu: 1, scratch_disk: 30}
  - id: b
    run: x
`))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int64{"gpu": 2, "licence": 0}; !maps.Equal(wf.Resources, want) {
		t.Errorf("workflow resources %v, want %v", wf.Resources, want)
	}
	want := map[string]int64{"gpu": 1, "scratch_disk": 30}
	for _, j := range wf.Jobs[:2] {
		if !maps.Equal(j.Resources, want) {
			t.Errorf("%s: resources %v, want %v", j.ID, j.Resources, want)
		}
	}
	if r := wf.Jobs[2].Resources; r != nil {
		t.Errorf("b: resources %v, want nil", r)
	}
}

func TestResourceEnv(t *testing.T) {
	for name, want := range map[string]string{"gpu": "POOLRUN_RES_GPU", "Scratch_disk2": "POOLRUN_RES_SCRATCH_DISK2", "_x": "POOLRUN_RES__X"} {
		if got := workflow.ResourceEnv(name); got != want {
			t.Errorf("ResourceEnv(%q) = %q, want %q", name, got, want)
		}
	}
	for _, s := range []string{"", "1gpu", "a-b", "é", "a b"} {
		if workflow.ResourceName(s) {
			t.Errorf("ResourceName(%q) is true", s)
		}
	}
}
