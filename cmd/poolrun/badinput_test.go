package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// badWorkflow is a workflow whose job would leave ran-a behind, with the
// foreach range and the timeout of each case.
func badWorkflow(foreach, timeout string) string {
	return "jobs:\n  - id: a-${i}\n    foreach: {i: " + foreach + "}\n    run: touch ran-a\n    timeout: " + timeout + "\n"
}

// Values out of range, in flags or in a workflow file, are refused before
// anything runs, with exit status 2 and a message that names the flag and
// the value, or the file and the line.
func TestBadInput(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		args     []string
		workflow string   // written to wf.yaml, if not empty
		want     []string // in standard error
	}{
		{"run -j -1", []string{"run", "-j", "-1", "wf.yaml"}, badWorkflow("1..2", "1s"), []string{"poolrun: -j -1: want a number of workers from 1 to 4096"}},
		{"scaffold -j -1", []string{"scaffold", "-j", "-1", "--out", "out"}, "", []string{"poolrun: -j -1: want a number of workers from 1 to 4096"}},
		{"bench -j -1", []string{"bench", "-j", "-1", "--out", "out"}, "", []string{"poolrun bench: -j -1: want a number of workers from 1 to 4096"}},
		{"scaffold --capacity 0", []string{"scaffold", "--capacity", "0", "--out", "out"}, "", []string{"--capacity 0: want a number of slots from 1 to 16777216"}},
		{"bench --capacity 0", []string{"bench", "--capacity", "0", "--out", "out"}, "", []string{"--capacity 0: want a number of slots from 1 to 16777216"}},
		{"scaffold --scale 1e9", []string{"scaffold", "--scale", "1e9", "--out", "out"}, "", []string{"poolrun scaffold: --scale 1e+09: want a factor above 0 and at most 1000"}},
		{"bench --scale 1e9", []string{"bench", "--scale", "1e9", "--out", "out"}, "", []string{"poolrun bench: --scale 1e+09: want a factor above 0 and at most 1000"}},
		{"scaffold --scale 0", []string{"scaffold", "--scale", "0", "--out", "out"}, "", []string{"--scale 0: want a factor above 0"}},
		{"run --retries -1", []string{"run", "--retries", "-1", "wf.yaml"}, badWorkflow("1..2", "1s"), []string{"poolrun: --retries -1: want a number of retries from 0 to 100"}},
		{"run --retries 101", []string{"run", "--retries", "101", "wf.yaml"}, badWorkflow("1..2", "1s"), []string{"poolrun: --retries 101: want a number of retries from 0 to 100"}},
		{"run --timeout without a unit", []string{"run", "--timeout", "5", "wf.yaml"}, badWorkflow("1..2", "1s"), []string{"poolrun run: --timeout 5: want a duration with its unit, such as 90s"}},
		{"run --timeout -1s", []string{"run", "--timeout", "-1s", "wf.yaml"}, badWorkflow("1..2", "1s"), []string{"poolrun: --timeout -1s: want a duration of 0 (no limit) or more"}},
		{"report in a missing folder", []string{"run", "--report", "no-such-folder/r.json", "wf.yaml"}, badWorkflow("1..2", "1s"), []string{"--report no-such-folder/r.json: no folder no-such-folder"}},
		{"backwards foreach range", []string{"run", "wf.yaml"}, badWorkflow("8..1", "1s"), []string{`wf.yaml:3: job "a-${i}": foreach variable "i": bad range "8..1": the start is greater than the end`}},
		{"negative foreach range", []string{"run", "wf.yaml"}, badWorkflow("-1..-10", "1s"), []string{`wf.yaml:3: job "a-${i}": foreach variable "i": bad range "-1..-10"`}},
		{"absurd foreach range", []string{"run", "wf.yaml"}, badWorkflow("1..1000000000", "1s"), []string{`wf.yaml:3: job "a-${i}": foreach variable "i": range "1..1000000000" has more than 10000000 values`}},
		{"foreach range beyond int64", []string{"run", "wf.yaml"}, badWorkflow("1..99999999999999999999", "1s"), []string{`wf.yaml:3: job "a-${i}": foreach variable "i": bad range "1..99999999999999999999": number out of range`}},
		{"negative timeout", []string{"run", "wf.yaml"}, badWorkflow("1..2", "-1s"), []string{`wf.yaml:5: job "a-${i}": timeout "-1s": want a duration of more than zero`}},
		{"timeout without a unit", []string{"run", "wf.yaml"}, badWorkflow("1..2", "30"), []string{`wf.yaml:5: job "a-${i}": timeout "30" is not a duration`}},
		{"billion laughs", []string{"run", "wf.yaml"},
			"jobs:\n  - {id: lol, run: touch ran-a}\n  - {id: a, run: x, after: &l1 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]}\n" +
				"  - {id: b, run: x, after: &l2 [*l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1]}\n" +
				"  - {id: c, run: x, after: &l3 [*l2, *l2, *l2, *l2, *l2, *l2, *l2, *l2, *l2, *l2]}\n",
			[]string{`wf.yaml:4: job "b": after must be a list of strings, not a list of a list`}},
		{"YAML error deep in the file", []string{"run", "wf.yaml"},
			"jobs:\n" + strings.Repeat("  - id: x-${i}\n    foreach: {i: 1..3}\n    run: touch ran-a\n", 1000) + "  - id: y\n     run: x\n",
			[]string{"wf.yaml:3003: bad YAML: mapping values are not allowed in this context"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.workflow != "" {
				if err := os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(tt.workflow), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r := poolrun(t, dir, tt.args...)
			if r.code != 2 {
				t.Errorf("exit %d, want 2\n%s", r.code, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr %q does not contain %q", r.stderr, w)
				}
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if e.Name() != "wf.yaml" {
					t.Errorf("%s appeared: something ran", e.Name())
				}
			}
		})
	}
}
