package workflow_test

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/internal/workflow"
)

// laughs returns the levels of a "billion laughs": a list of ten values
// anchored as &l1, then &l2 holding ten *l1, and so on to &l9, which
// stands for 10⁹ values. Each level is one line, at indent, after key; the
// value of the first is ten times "lol".
func laughs(indent, key string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s%s: &l1 [%s]\n", indent, key, strings.TrimSuffix(strings.Repeat("lol, ", 10), ", "))
	for i := 2; i <= 9; i++ {
		fmt.Fprintf(&b, "%s%s%d: &l%d [%s]\n", indent, key, i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", "))
	}
	return b.String()
}

// repeat returns n lines, each indent followed by line.
func repeat(n int, indent, line string) string {
	return strings.Repeat(indent+line+"\n", n)
}

// vars returns n foreach variables, one a line, each with one value.
func vars(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "      v%d: [x]\n", i)
	}
	return b.String()
}

// entries returns n job entries, one a line, with ids prefix0, prefix1...
// and the given fields.
func entries(n int, prefix, fields string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  - {id: '%s%d', run: x, %s}\n", prefix, i, fields)
	}
	return b.String()
}

// aliasBombs are workflows whose aliases stand for billions of values, or
// for more jobs or dependencies than a workflow may have.
var aliasBombs = []struct {
	name string
	in   string
	want string // a line of the error: the mistake the bomb is refused with
}{
	{
		name: "billion laughs under an unknown field",
		in:   "laughs:\n" + laughs("  ", "l") + "jobs: *l9\n",
		want: `bomb.yaml:1: unknown field "laughs" (a workflow has jobs, items, workers, vars, workdir and resources)`,
	},
	{
		name: "billion laughs as foreach variables",
		in:   "jobs:\n  - id: a\n    run: x\n    foreach:\n" + laughs("      ", "v"),
		want: `bomb.yaml:6: job "a": foreach variable "v2": values must be strings, not a list`,
	},
	{
		name: "billion laughs as foreach values",
		in: "jobs:\n  - id: a-${v}\n    run: x\n    foreach: {v: &l1 [" + strings.TrimSuffix(strings.Repeat("lol, ", 10), ", ") + "]}\n" +
			"  - id: b-${v}\n    run: x\n    foreach: {v: &l2 [" + strings.TrimSuffix(strings.Repeat("*l1, ", 10), ", ") + "]}\n",
		want: `bomb.yaml:7: job "b-${v}": foreach variable "v": values must be strings, not a list`,
	},
	{
		name: "billion laughs as after",
		in: "jobs:\n  - {id: lol, run: x}\n  - {id: a, run: x, after: &l1 [" + strings.TrimSuffix(strings.Repeat("lol, ", 10), ", ") + "]}\n" +
			"  - {id: b, run: x, after: &l2 [" + strings.TrimSuffix(strings.Repeat("*l1, ", 10), ", ") + "]}\n",
		want: `bomb.yaml:4: job "b": after must be a list of strings, not a list of a list`,
	},
	{
		name: "a job repeated by aliases",
		// 5 million jobs; the entry itself, expanded once to look
		// for other mistakes, gives 5,000.
		in:   "jobs:\n  - &e {id: 'a-${i}', run: x, foreach: {i: 1..5000}}\n" + repeat(1000, "  ", "- *e"),
		want: `bomb.yaml:3: job "a-${i}": an alias repeats the job of line 2, and so its ids`,
	},
	{
		name: "a long after list shared by many jobs",
		in:   "jobs:\n  - {id: b, run: x, after: &l [" + strings.TrimSuffix(strings.Repeat("b, ", 10_000), ", ") + "]}\n" + entries(200, "a", "after: *l"),
		want: `bomb.yaml:102: job "a99": the workflow has more than 1000000 dependencies`,
	},
	{
		name: "a long foreach shared by many jobs",
		in:   "jobs:\n  - {id: 'b-${i}', run: x, foreach: &f {i: 1..50000}}\n" + entries(10, "a${i}-", "foreach: *f"),
		want: `bomb.yaml:4: job "a${i}-1": the workflow has more than 100000 jobs`,
	},
	{
		name: "many foreach variables shared by many jobs",
		in:   "jobs:\n  - id: b\n    run: x\n    foreach: &f\n" + vars(10_000) + entries(200, "a", "foreach: *f"),
		want: `bomb.yaml:10104: job "a99": foreach gives the workflow's jobs more than 1000000 values in all`,
	},
}

// An alias bomb is answered with an error that names the file and the
// line, without expanding the aliases: the memory it takes is of the order
// of the file's (the YAML library takes about 50 bytes per byte of YAML,
// and the largest file here is 0.2 MB), where expanding the aliases would
// take gigabytes.
func TestAliasBombs(t *testing.T) {
	for _, tt := range aliasBombs {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := workflow.Parse("bomb.yaml", []byte(tt.in))
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes of YAML: %d KiB allocated", len(tt.in), alloc>>10)
			if limit := uint64(16 << 20); alloc > limit {
				t.Errorf("%d MiB allocated, more than %d MiB", alloc>>20, limit>>20)
			}
			var werr *workflow.Error
			if !errors.As(err, &werr) || werr.File != "bomb.yaml" || werr.Line < 1 {
				t.Fatalf("error %v is not a *workflow.Error with the file and a line", err)
			}
			lines := strings.Split(err.Error(), "\n")
			if !slices.Contains(lines, tt.want) || len(lines) > workflow.MaxErrors+1 {
				t.Errorf("error\n got: %s\nwant a line: %s", err, tt.want)
			}
		})
	}
}
