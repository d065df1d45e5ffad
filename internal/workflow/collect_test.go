package workflow_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/internal/workflow"
)

// Parse reports every mistake of a file at once, one per line, in the
// order of the lines, and no mistake that only follows from another.
func TestParseReportsEveryMistake(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string // every error line
	}{
		{name: "independent mistakes", in: `
jobs:
  - id: a
    run: x
    colour: red
  - id: b
    run: x
    after: [nope]
  - id: c
    timeout: soon
  - id: d
    run: x
    needs: [ref]
`, want: []string{
			`wf.yaml:4: job "a": unknown field "colour" (a job has id, run, worker, args, after, needs, inputs, outputs, foreach, timeout, retries, retry_delay, threads, mem, resources and desc)`,
			`wf.yaml:7: job "b": after "nope": no such job`,
			`wf.yaml:8: job "c" has no run command`,
			`wf.yaml:9: job "c": timeout "soon" is not a duration: write a number and a unit, such as 90s, 2m or 1h30m`,
			`wf.yaml:12: job "d": needs "ref": no such item`,
		}},
		{name: "sorted by line, whatever the step that finds them", in: `
jobs:
  - id: a
    run: x
    after: [nope]
  - id: b
    run: x
    colour: red
`, want: []string{
			`wf.yaml:4: job "a": after "nope": no such job`,
			`wf.yaml:7: job "b": unknown field "colour" (a job has id, run, worker, args, after, needs, inputs, outputs, foreach, timeout, retries, retry_delay, threads, mem, resources and desc)`,
		}},
		{name: "a job without id is not reported again as unknown", in: `
jobs:
  - run: x
  - id: b
    run: x
    after: [a]
`, want: []string{`wf.yaml:2: job has no id`}},
		{name: "the jobs of a bad foreach are not reported as unknown", in: `
jobs:
  - id: a-${i}
    foreach: {i: 3..1}
    run: x
  - id: b
    run: x
    after: [a-1, "a-*"]
`, want: []string{`wf.yaml:3: job "a-${i}": foreach variable "i": bad range "3..1": the start is greater than the end`}},
		{name: "a needs of an item with a mistake is not reported", in: `
items:
  ref: {run: x, clean: y}
jobs:
  - {id: a, run: x, needs: [ref]}
  - {id: b, run: x, needs: [fer]}
`, want: []string{
			`wf.yaml:2: item "ref": unknown field "clean" (an item has run or worker)`,
			`wf.yaml:5: job "b": needs "fer": no such item`,
		}},
		{name: "a foreach entry's mistake once, not once per job", in: `
jobs:
  - id: a-${i}
    foreach: {i: 1..50}
    run: ./x ${j}
    after: [nope]
`, want: []string{
			`wf.yaml:4: job "a-${i}": run: unknown variable ${j} (foreach defines i); for a shell variable write $j or $${j}`,
			`wf.yaml:5: job "a-1": after "nope": no such job`,
		}},
		{name: "nothing after a YAML error", in: `
jobs:
  - id: a
    colour: red
  - id: b
     run: x
`, want: []string{`wf.yaml:5: bad YAML: mapping values are not allowed in this context`}},
		{name: "nothing after a limit", in: `
colour: red
jobs:
  - id: a-${i}
    foreach: {i: 1..60000}
    run: x
  - id: b-${i}
    foreach: {i: 1..60000}
    run: x
  - id: c
    run: x
    after: [nope]
`, want: []string{
			`wf.yaml:1: unknown field "colour" (a workflow has jobs, items, workers, vars, workdir and resources)`,
			`wf.yaml:6: job "b-${i}": the workflow has more than 100000 jobs`,
		}},
		{name: "a repeated key and the fields after it", in: `
jobs:
  - id: a
    run: x
    run: y
    timeout: 0s
`, want: []string{
			`wf.yaml:4: job "a": "run" given twice (first at line 3)`,
			`wf.yaml:5: job "a": timeout "0s": want a duration of more than zero`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := workflow.Parse("wf.yaml", yamlText(tt.in))
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, tt.want) {
				t.Errorf("Parse error\n got: %s\nwant: %s", strings.Join(got, "\n      "), strings.Join(tt.want, "\n      "))
			}
			var errs *workflow.Errors
			if !errors.As(err, &errs) || len(errs.List) != len(tt.want) || errs.More != 0 {
				t.Fatalf("error %T is not an *Errors of %d", err, len(tt.want))
			}
			var first *workflow.Error
			if !errors.As(err, &first) || first != errs.List[0] || first.Error() != tt.want[0] {
				t.Errorf("errors.As finds %v, want the first, %s", first, tt.want[0])
			}
		})
	}
}

// More mistakes than MaxErrors: the first MaxErrors, then how many more.
func TestParseErrorsLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("jobs:\n")
	const n = workflow.MaxErrors + 13
	for i := range n {
		fmt.Fprintf(&b, "  - {id: j%d, run: x, colour: red}\n", i)
	}
	_, err := workflow.Parse("many.yaml", []byte(b.String()))
	var errs *workflow.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %v is not an *Errors", err)
	}
	if len(errs.List) != workflow.MaxErrors || errs.More != n-workflow.MaxErrors {
		t.Errorf("%d errors and %d more, want %d and %d", len(errs.List), errs.More, workflow.MaxErrors, n-workflow.MaxErrors)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != workflow.MaxErrors+1 || lines[workflow.MaxErrors] != "... and 13 more" {
		t.Errorf("%d lines, the last %q; want %d, the last \"... and 13 more\"", len(lines), lines[len(lines)-1], workflow.MaxErrors+1)
	}
	for i, e := range errs.List {
		if e.Line != i+2 {
			t.Errorf("error %d at line %d, want %d", i, e.Line, i+2)
		}
	}
}

func TestInputsOutputs(t *testing.T) {
	w, err := workflow.Parse("io.yaml", yamlText(`
jobs:
  - id: compile-${i}
    foreach: {i: 1..2}
    run: cc -c src/${i}.c -o out/${i}.o
    inputs:
      - src/${i}.c
      - include/*.h
      - src/${i}.c
    outputs: out/${i}.o
  - id: link
    run: cc out/*.o -o prog
    inputs: ["out/*.o"]
    outputs: [prog, out/prog.map]
    after: ["compile-*"]
  - id: test
    run: ./prog
    after: [link]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2][]string{
		"compile-1": {{"src/1.c", "include/*.h"}, {"out/1.o"}},
		"compile-2": {{"src/2.c", "include/*.h"}, {"out/2.o"}},
		"link":      {{"out/*.o"}, {"prog", "out/prog.map"}},
		"test":      {nil, nil},
	}
	for _, j := range w.Jobs {
		io := want[j.ID]
		if !slices.Equal(j.Inputs, io[0]) || !slices.Equal(j.Outputs, io[1]) {
			t.Errorf("job %s: inputs %q, outputs %q; want %q and %q", j.ID, j.Inputs, j.Outputs, io[0], io[1])
		}
		if (j.Inputs == nil) != (io[0] == nil) || (j.Outputs == nil) != (io[1] == nil) {
			t.Errorf("job %s: nil-ness of inputs or outputs", j.ID)
		}
	}
}

func TestMatch(t *testing.T) {
	w, err := workflow.Parse("m.yaml", yamlText(`
jobs:
  - {id: 'chunk-${i}', foreach: {i: 1..3}, run: x}
  - {id: merge, run: x, after: ['chunk-*']}
`))
	if err != nil {
		t.Fatal(err)
	}
	ids := func(jobs []*workflow.Job) []string {
		var out []string
		for _, j := range jobs {
			out = append(out, j.ID)
		}
		return out
	}
	for _, tt := range []struct {
		pattern string
		want    []string
	}{
		{"*", []string{"chunk-1", "chunk-2", "chunk-3", "merge"}},
		{"chunk-[12]", []string{"chunk-1", "chunk-2"}},
		{"merge", []string{"merge"}},
		{"nope", nil},
	} {
		got, err := w.Match(tt.pattern)
		if err != nil || !slices.Equal(ids(got), tt.want) {
			t.Errorf("Match(%q) = %q, %v; want %q", tt.pattern, ids(got), err, tt.want)
		}
	}
	if _, err := w.Match("chunk-["); err == nil || !strings.Contains(err.Error(), `"chunk-["`) {
		t.Errorf("Match of a bad pattern: %v, want an error naming it", err)
	}
}
