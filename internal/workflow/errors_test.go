package workflow_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/internal/workflow"
)

// yamlText drops the newline that opens a raw string, so that the text
// starts on line 1.
func yamlText(s string) []byte {
	return []byte(strings.TrimPrefix(s, "\n"))
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // the whole error, FILE:LINE: message; {WD} stands for the current folder, {UP} and {UP2} for the folders above
	}{
		// YAML itself.
		{name: "yaml syntax", in: `
jobs:
  - id: a
    run: x
   after: [b]
`, want: "wf.yaml:4: bad YAML: did not find expected '-' indicator"},
		{name: "yaml error without a line from the library", in: `
jobs:
  - id: a
    run: "echo \q"
`, want: "wf.yaml:3: bad YAML: found unknown escape character"},
		{name: "unknown alias", in: `
jobs:
  - id: a
    run: x
    after: *nope
`, want: "wf.yaml:4: bad YAML: unknown anchor 'nope' referenced"},
		{name: "tab indentation", in: "jobs:\n\t- id: a\n", want: "wf.yaml:2: bad YAML: found character that cannot start any token"},
		{name: "second document", in: `
jobs:
  - {id: a, run: x}
---
jobs: []
`, want: "wf.yaml:3: a second YAML document: a workflow file holds only one"},

		// Shape and unknown fields.
		{name: "empty file", in: "", want: "wf.yaml:1: empty workflow: no jobs"},
		{name: "only comments", in: "# nothing\n", want: "wf.yaml:1: empty workflow: no jobs"},
		{name: "no jobs field", in: `
items:
  ref: {run: x}
`, want: "wf.yaml:1: empty workflow: no jobs"},
		{name: "empty jobs", in: `
# a comment
jobs: []
`, want: "wf.yaml:2: empty workflow: no jobs"},
		{name: "null jobs", in: "jobs:\n", want: "wf.yaml:1: empty workflow: no jobs"},
		{name: "root is a list", in: "- id: a\n", want: "wf.yaml:1: a workflow is a mapping with jobs (and items), not a list"},
		{name: "jobs is a mapping", in: "jobs:\n  a: {run: x}\n", want: "wf.yaml:2: jobs must be a list of jobs, not a mapping"},
		{name: "unknown top-level field", in: `
jobs:
  - {id: a, run: x}
job:
  - {id: b, run: x}
`, want: `wf.yaml:3: unknown field "job" (a workflow has jobs, items, workers, vars, workdir and resources)`},
		{name: "unknown job field", in: `
jobs:
  - id: a
    run: x
    need: [ref]
`, want: `wf.yaml:4: job "a": unknown field "need" (a job has id, run, worker, args, after, needs, inputs, outputs, foreach, timeout, retries, retry_delay, threads, mem, resources and desc)`},
		{name: "unknown item field", in: `
items:
  ref:
    run: x
    cleanup: y
jobs:
  - {id: a, run: x}
`, want: `wf.yaml:4: item "ref": unknown field "cleanup" (an item has run or worker)`},
		{name: "repeated field", in: `
jobs:
  - id: a
    run: x
    run: y
`, want: `wf.yaml:4: job "a": "run" given twice (first at line 3)`},
		{name: "merge key", in: `
jobs:
  - &base {id: a, run: x}
  - <<: *base
    id: b
`, want: `wf.yaml:3: job "b": merge keys (<<) are not supported`},
		{name: "job is a string", in: "jobs:\n  - echo hi\n", want: `wf.yaml:2: a job must be a mapping with id and run, not "echo hi"`},

		// Jobs.
		{name: "missing id", in: `
jobs:
  - run: x
`, want: "wf.yaml:2: job has no id"},
		{name: "empty id", in: `
jobs:
  - id: ""
    run: x
`, want: "wf.yaml:2: job has no id"},
		{name: "id is a list", in: `
jobs:
  - id: [a]
    run: x
`, want: "wf.yaml:2: job id must be a string, not a list"},
		{name: "missing run", in: `
jobs:
  - id: a
    after: []
`, want: `wf.yaml:2: job "a" has no run command`},
		{name: "blank run", in: `
jobs:
  - id: a
    run: "  "
`, want: `wf.yaml:3: job "a" has no run command`},
		{name: "run is a list", in: `
jobs:
  - id: a
    run: [echo, hi]
`, want: `wf.yaml:3: job "a": run must be a string, not a list`},
		{name: "bad id", in: `
jobs:
  - id: a b
    run: x
`, want: `wf.yaml:2: job id "a b" is not valid: use letters, digits and _-./:+=@`},
		{name: "id with a glob character", in: `
jobs:
  - id: a*
    run: x
`, want: `wf.yaml:2: job id "a*" is not valid: use letters, digits and _-./:+=@`},
		{name: "duplicate id", in: `
jobs:
  - id: a
    run: x
  - id: b
    run: x
  - run: y
    id: a
`, want: `wf.yaml:7: duplicate job id "a" (first at line 2)`},
		{name: "after is a mapping", in: `
jobs:
  - id: a
    run: x
    after: {b: 1}
`, want: `wf.yaml:4: job "a": after must be a list of strings, not a mapping`},
		{name: "needs holds a list", in: `
jobs:
  - id: a
    run: x
    needs: [[ref]]
`, want: `wf.yaml:4: job "a": needs must be a list of strings, not a list of a list`},

		// Dependencies.
		{name: "unknown after", in: `
jobs:
  - id: a
    run: x
  - id: b
    run: x
    after:
      - a
      - c
`, want: `wf.yaml:8: job "b": after "c": no such job`},
		{name: "glob matching nothing", in: `
jobs:
  - id: a
    run: x
  - id: b
    run: x
    after: [c-*]
`, want: `wf.yaml:6: job "b": after "c-*" matches no job`},
		{name: "glob matching only itself", in: `
jobs:
  - id: merge
    run: x
    after: ["m*"]
`, want: `wf.yaml:4: job "merge": after "m*" matches no job`},
		{name: "bad glob", in: `
jobs:
  - id: a
    run: x
    after: ["[a"]
`, want: `wf.yaml:4: job "a": after "[a": bad pattern`},
		{name: "cycle", in: `
jobs:
  - id: a
    run: x
    after: [b]
  - id: b
    run: x
    after: [a]
`, want: `wf.yaml:2: dependency cycle: a -> b (wf.yaml:5) -> a`},
		{name: "self cycle", in: `
jobs:
  - id: a
    run: x
  - id: b
    run: x
    after: [b]
`, want: `wf.yaml:4: dependency cycle: b -> b`},
		{name: "cycle behind other jobs, written from its first job", in: `
jobs:
  - id: start
    run: x
    after: [d]
  - id: c
    run: x
    after: [e]
  - id: d
    run: x
    after: [c]
  - id: e
    run: x
    after: [d]
`, want: `wf.yaml:5: dependency cycle: c -> e (wf.yaml:11) -> d (wf.yaml:8) -> c`},
		{name: "cycle through a glob", in: `
jobs:
  - id: step-${i}
    foreach: {i: 1..3}
    run: x
  - id: merge
    run: x
    after: [step-*]
  - id: step-0
    run: x
    after: [merge]
`, want: `wf.yaml:5: dependency cycle: merge -> step-0 (wf.yaml:8) -> merge`},

		// Retries and resources.
		{name: "negative retries", in: `
jobs:
  - id: a
    run: x
    retries: -1
`, want: `wf.yaml:4: job "a": retries -1: want a whole number from 0 to 100`},
		{name: "retries not a number", in: `
jobs:
  - id: a
    run: x
    retries: [1]
`, want: `wf.yaml:4: job "a": retries must be a whole number from 0 to 100, not a list`},
		{name: "bad retry_delay", in: `
jobs:
  - id: a
    run: x
    retry_delay: 5
`, want: `wf.yaml:4: job "a": retry_delay "5" is not a duration: write a number and a unit, such as 90s, 2m or 1h30m`},
		{name: "zero retry_delay", in: `
jobs:
  - id: a
    run: x
    retry_delay: 0s
`, want: `wf.yaml:4: job "a": retry_delay "0s": want a duration of more than zero`},
		{name: "resources not a mapping", in: `
jobs:
  - id: a
    run: x
    resources: gpu
`, want: `wf.yaml:4: job "a": resources must be a mapping of resource names to whole numbers, such as {gpu: 1}, not "gpu"`},
		{name: "negative resource", in: `
jobs:
  - id: a
    run: x
    resources: {gpu: -1}
`, want: `wf.yaml:4: job "a": resources: gpu -1: want a whole number, 0 or more`},
		{name: "fractional resource", in: `
jobs:
  - id: a
    run: x
    resources:
      gpu: 1.5
`, want: `wf.yaml:5: job "a": resources: gpu 1.5: want a whole number, 0 or more`},
		{name: "bad resource name", in: `
jobs:
  - id: a
    run: x
    resources:
      my-gpu: 1
`, want: `wf.yaml:5: job "a": resources: "my-gpu" is not a resource name (a letter or _, then letters, digits or _)`},
		{name: "threads as a resource", in: `
jobs:
  - id: a
    run: x
    resources:
      threads: 2
`, want: `wf.yaml:5: job "a": resources: threads is not a named resource: write it as the job's threads: field`},
		{name: "mem as a workflow resource", in: `
resources:
  mem: 2
jobs:
  - id: a
    run: x
`, want: `wf.yaml:2: resources: mem is not a named resource: its limit is poolrun run's --mem`},
		{name: "resource given twice", in: `
resources:
  gpu: 1
  gpu: 2
jobs:
  - id: a
    run: x
`, want: `wf.yaml:3: resources: "gpu" given twice (first at line 2)`},
		{name: "resources differing in case", in: `
jobs:
  - id: a
    run: x
    resources:
      gpu: 1
      GPU: 1
`, want: `wf.yaml:6: job "a": resources: "gpu" and "GPU" differ only in case (both would be $POOLRUN_RES_GPU)`},
		{name: "zero threads", in: `
jobs:
  - id: a
    run: x
    threads: 0
`, want: `wf.yaml:4: job "a": threads 0: want a whole number from 1 to 4096`},
		{name: "too many threads", in: `
jobs:
  - id: a
    run: x
    threads: 4097
`, want: `wf.yaml:4: job "a": threads 4097: want a whole number from 1 to 4096`},
		{name: "bad mem unit", in: `
jobs:
  - id: a
    run: x
    mem: 2 lots
`, want: `wf.yaml:4: job "a": mem "2 lots": want a size in bytes, or with a unit K, M, G or T (powers of 1024), such as 512M, 2G or 1.5GiB`},
		{name: "negative mem", in: `
jobs:
  - id: a
    run: x
    mem: -1G
`, want: `wf.yaml:4: job "a": mem "-1G": want a size in bytes, or with a unit K, M, G or T (powers of 1024), such as 512M, 2G or 1.5GiB`},
		{name: "huge mem", in: `
jobs:
  - id: a
    run: x
    mem: 9000000T
`, want: `wf.yaml:4: job "a": mem "9000000T": too large: want less than 8 EiB`},

		// Timeouts.
		{name: "timeout without a unit", in: `
jobs:
  - id: a
    run: x
    timeout: 90
`, want: `wf.yaml:4: job "a": timeout "90" is not a duration: write a number and a unit, such as 90s, 2m or 1h30m`},
		{name: "timeout not a duration", in: `
jobs:
  - id: a-${i}
    foreach: {i: 1..2}
    run: x
    timeout: soon
`, want: `wf.yaml:5: job "a-${i}": timeout "soon" is not a duration: write a number and a unit, such as 90s, 2m or 1h30m`},
		{name: "timeout too large for a duration", in: `
jobs:
  - {id: a, run: x, timeout: 3000000h}
`, want: `wf.yaml:2: job "a": timeout "3000000h" is not a duration: write a number and a unit, such as 90s, 2m or 1h30m`},
		{name: "negative timeout", in: `
jobs:
  - id: a
    run: x
    timeout: -5s
`, want: `wf.yaml:4: job "a": timeout "-5s": want a duration of more than zero`},
		{name: "zero timeout", in: `
jobs:
  - id: a
    run: x
    timeout: 0s
`, want: `wf.yaml:4: job "a": timeout "0s": want a duration of more than zero`},
		{name: "bare zero timeout", in: `
jobs:
  - id: a
    run: x
    timeout: 0
`, want: `wf.yaml:4: job "a": timeout "0": want a duration of more than zero`},
		{name: "empty timeout", in: `
jobs:
  - id: a
    run: x
    timeout:
`, want: `wf.yaml:4: job "a": timeout must be a duration such as 90s, 2m or 1h30m, not null`},
		{name: "timeout is a list", in: `
jobs:
  - id: a
    run: x
    timeout: [1s]
`, want: `wf.yaml:4: job "a": timeout must be a duration such as 90s, 2m or 1h30m, not a list`},
		{name: "timeout given twice", in: `
jobs:
  - id: a
    run: x
    timeout: 1s
    timeout: 2s
`, want: `wf.yaml:5: job "a": "timeout" given twice (first at line 4)`},

		// Items.
		{name: "unknown item", in: `
items:
  ref: {run: x}
jobs:
  - id: a
    run: x
    needs: [ref, rfe]
`, want: `wf.yaml:6: job "a": needs "rfe": no such item`},
		{name: "item without run", in: `
items:
  ref: {}
jobs:
  - {id: a, run: x}
`, want: `wf.yaml:2: item "ref" has no run command`},
		{name: "null item", in: `
items:
  ref:
jobs:
  - {id: a, run: x}
`, want: `wf.yaml:2: item "ref" has no run command`},
		{name: "item is a string", in: `
items:
  ref: zcat ref.gz > "$POOLRUN_ITEM"
jobs:
  - {id: a, run: x}
`, want: `wf.yaml:2: item "ref" must be a mapping with run (or worker), not "zcat ref.gz > \"$POOLRUN_ITEM\""`},
		{name: "bad item name", in: `
items:
  "my ref": {run: x}
jobs:
  - {id: a, run: x}
`, want: `wf.yaml:2: item name "my ref" is not valid: start with a letter or digit, then use letters, digits, _ - and .`},
		{name: "duplicate item", in: `
items:
  ref: {run: x}
  ref: {run: y}
jobs:
  - {id: a, run: x}
`, want: `wf.yaml:3: items: "ref" given twice (first at line 2)`},
		{name: "items with one environment variable", in: `
items:
  ref-a: {run: x}
  Ref_A: {run: y}
jobs:
  - {id: a, run: x}
`, want: `wf.yaml:3: items "Ref_A" and "ref-a" (line 2) both give the environment variable POOLRUN_ITEM_REF_A`},
		{name: "items is a list", in: `
items: [ref]
jobs:
  - {id: a, run: x}
`, want: `wf.yaml:1: items must be a mapping of item names to items, not a list`},
		{name: "variable in an item", in: `
items:
  ref: {run: 'cp ${src} "$POOLRUN_ITEM"'}
jobs:
  - {id: a, run: x}
`, want: `wf.yaml:2: item "ref": run: unknown variable ${src} (an item has no foreach); for a shell variable write $src or $${src}`},

		// foreach.
		{name: "foreach empty list", in: `
jobs:
  - id: a-${i}
    foreach: {i: []}
    run: x
`, want: `wf.yaml:3: job "a-${i}": foreach variable "i" has an empty list`},
		{name: "foreach empty mapping", in: `
jobs:
  - id: a
    foreach: {}
    run: x
`, want: `wf.yaml:3: job "a": foreach is empty`},
		{name: "foreach null", in: `
jobs:
  - id: a
    foreach:
    run: x
`, want: `wf.yaml:3: job "a": foreach must map variable names to values, not null`},
		{name: "foreach plain list", in: `
jobs:
  - id: a-${item}
    foreach: [a, b]
    run: x
`, want: `wf.yaml:3: job "a-${item}": foreach must name its variables, as in foreach: {x: [a, b]}`},
		{name: "foreach backwards range", in: `
jobs:
  - id: a-${i}
    foreach: {i: 8..1}
    run: x
`, want: `wf.yaml:3: job "a-${i}": foreach variable "i": bad range "8..1": the start is greater than the end`},
		{name: "foreach not a range", in: `
jobs:
  - id: a-${i}
    foreach: {i: 1-8}
    run: x
`, want: `wf.yaml:3: job "a-${i}": foreach variable "i": want a list, a range "A..B" or a glob of files such as "data/*.csv", not "1-8"`},
		{name: "foreach range out of int64", in: `
jobs:
  - id: a-${i}
    foreach: {i: 1..99999999999999999999}
    run: x
`, want: `wf.yaml:3: job "a-${i}": foreach variable "i": bad range "1..99999999999999999999": number out of range`},
		{name: "foreach range too large", in: `
jobs:
  - id: a-${i}
    foreach: {i: -9223372036854775808..9223372036854775807}
    run: x
`, want: `wf.yaml:3: job "a-${i}": foreach variable "i": range "-9223372036854775808..9223372036854775807" has more than 100000 values`},
		{name: "foreach product too large", in: `
jobs:
  - id: a-${i}-${j}
    foreach:
      i: 1..1000
      j: 1..1000
    run: x
`, want: `wf.yaml:4: job "a-${i}-${j}": foreach gives more than 100000 jobs`},
		{name: "workflow too large", in: `
jobs:
  - id: a-${i}
    foreach: {i: 1..60000}
    run: x
  - id: b-${i}
    foreach: {i: 1..60000}
    run: x
`, want: `wf.yaml:5: job "b-${i}": the workflow has more than 100000 jobs`},
		{name: "foreach value is a mapping", in: `
jobs:
  - id: a-${i}
    foreach: {i: {x: 1}}
    run: x
`, want: `wf.yaml:3: job "a-${i}": foreach variable "i": want a list, a range "A..B" or a glob of files, not a mapping`},
		{name: "foreach bad variable name", in: `
jobs:
  - id: a-${I}
    foreach: {I: [a]}
    run: x
`, want: `wf.yaml:3: job "a-${I}": foreach variable "I" is not valid: start with a-z, then use a-z, 0-9 and _`},
		{name: "unknown variable in id", in: `
jobs:
  - id: a-${j}
    foreach: {i: 1..2}
    run: x
`, want: `wf.yaml:2: job "a-${j}": id: unknown variable ${j} (foreach defines i)`},
		{name: "unknown variable in run", in: `
jobs:
  - id: a-${i}
    foreach: {i: 1..2}
    run: ./work ${chunk}
`, want: `wf.yaml:4: job "a-${i}": run: unknown variable ${chunk} (foreach defines i); for a shell variable write $chunk or $${chunk}`},
		{name: "variable without foreach", in: `
jobs:
  - id: a
    run: for f in *; do echo ${f}; done
`, want: `wf.yaml:3: job "a": run: unknown variable ${f} (the job has no foreach); for a shell variable write $f or $${f}`},
		{name: "unknown variable in after", in: `
jobs:
  - id: a-${i}
    foreach: {i: 1..2}
    run: x
    after: ["b-${k}"]
`, want: `wf.yaml:5: job "a-${i}": after: unknown variable ${k} (foreach defines i)`},
		{name: "unquoted reference in a flow list", in: `
jobs:
  - id: a-${i}
    foreach: {i: 1..2}
    run: x
    after: [b-${i}]
`, want: `wf.yaml:5: bad YAML: did not find expected ',' or ']'; inside [ ] and { }, quote strings that contain ${...}: ["a-${i}"]`},
		{name: "yaml error deep in a list", in: `
jobs:
  - id: a
    run: x
  - id: b
    run: x
  - id: c
    run: x
     after: [a]
`, want: "wf.yaml:8: bad YAML: mapping values are not allowed in this context"},
		{name: "unclosed quote", in: `
jobs:
  - id: a
    run: "echo
  - id: b
    run: x
`, want: "wf.yaml:3: bad YAML: found unexpected end of stream"},
		{name: "unknown variable in needs", in: `
jobs:
  - id: a-${i}
    foreach: {i: 1..2}
    run: x
    needs:
      - ref-${I}
`, want: `wf.yaml:6: job "a-${i}": needs: unknown variable ${I} (foreach defines i)`},
		{name: "unclosed reference", in: `
jobs:
  - id: a-${i
    foreach: {i: 1..2}
    run: x
`, want: `wf.yaml:2: job "a-${i": id: unclosed "${i"`},
		{name: "foreach repeats an id", in: `
jobs:
  - id: sample-${s}
    foreach: {s: [a, b], k: 1..2}
    run: ./sample ${s} ${k}
`, want: `wf.yaml:2: job "sample-${s}": foreach gives the id "sample-a" twice (s=a k=1 and s=a k=2)`},
		{name: "foreach list repeats a value", in: `
jobs:
  - id: s-${s}
    foreach: {s: [a, b, a]}
    run: x
`, want: `wf.yaml:2: job "s-${s}": foreach gives the id "s-a" twice (s=a and s=a)`},
		{name: "foreach value makes a bad id", in: `
jobs:
  - id: s-${s}
    foreach: {s: [a, b c]}
    run: x
`, want: `wf.yaml:2: job id "s-b c" (s=b c) is not valid: use letters, digits and _-./:+=@`},
		// Inputs and outputs.
		{name: "inputs is a mapping", in: `
jobs:
  - id: a
    run: x
    inputs: {src: a.c}
`, want: `wf.yaml:4: job "a": inputs must be a list of strings, not a mapping`},
		{name: "bad input pattern", in: `
jobs:
  - id: a
    run: x
    inputs: ["data/[a"]
`, want: `wf.yaml:4: job "a": inputs "data/[a": bad pattern (write \[ for a [ in a name)`},
		{name: "the folder as an output", in: `
jobs:
  - id: a
    run: x
    outputs: [out/..]
`, want: `wf.yaml:4: job "a": outputs "out/..": the workflow's folder itself cannot be an output`},
		{name: "a folder above as an output", in: `
jobs:
  - id: a
    run: x
    outputs: ../..
`, want: `wf.yaml:4: job "a": outputs "../..": it is {UP2}, outside the workflow's folder {WD}: outputs must lie inside it`},
		{name: "an output in a folder beside", in: `
jobs:
  - id: a
    run: "false"
    outputs: ["../victim/*.txt"]
`, want: `wf.yaml:4: job "a": outputs "../victim/*.txt": it is {UP}/victim/*.txt, outside the workflow's folder {WD}: outputs must lie inside it`},
		{name: "an absolute output elsewhere", in: `
jobs:
  - id: a
    run: x
    outputs: ["/*"]
`, want: `wf.yaml:4: job "a": outputs "/*": it is /*, outside the workflow's folder {WD}: outputs must lie inside it`},
		{name: "an empty foreach value makes an output absolute", in: `
jobs:
  - id: a-${d}
    foreach: {d: ["", b]}
    run: x
    outputs: ["${d}/out/*"]
`, want: `wf.yaml:5: job "a-${d}": outputs "/out/*": it is /out/*, outside the workflow's folder {WD}: outputs must lie inside it`},
		{name: "an output that matches the workflow file", in: `
jobs:
  - id: a
    run: x
    outputs: ["*"]
`, want: `wf.yaml:4: job "a": outputs "*": it would match the workflow file wf.yaml`},
		{name: "an output that matches the state file", in: `
jobs:
  - id: a
    run: x
    outputs: [".*-state"]
`, want: `wf.yaml:4: job "a": outputs ".*-state": it would match the workflow's state file .wf.yaml.poolrun-state`},
		{name: "an output in .git", in: `
jobs:
  - id: a
    run: x
    outputs: [".git/config", "sub/.g*/x"]
`, want: `wf.yaml:4: job "a": outputs ".git/config": it would reach into a .git folder`},
		{name: "two jobs with one output", in: `
jobs:
  - id: a
    run: x
    outputs: [out/a.txt]
  - id: b-${i}
    foreach: {i: [a, b]}
    run: x
    outputs: ["out/${i}.txt"]
`, want: `wf.yaml:8: job "b-${i}": output "out/a.txt" is also an output of job "a" (line 2)`},
		{name: "unknown variable in outputs", in: `
jobs:
  - id: a-${i}
    foreach: {i: 1..2}
    run: x
    outputs:
      - out/${k}.txt
`, want: `wf.yaml:6: job "a-${i}": outputs: unknown variable ${k} (foreach defines i)`},
		{name: "foreach id clashes with another job", in: `
jobs:
  - id: chunk-2
    run: x
  - id: chunk-${i}
    foreach: {i: 1..3}
    run: x
`, want: `wf.yaml:4: duplicate job id "chunk-2" (first at line 2)`},
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := workflow.Parse("wf.yaml", yamlText(tt.in))
			if err == nil {
				t.Fatalf("Parse succeeded with %d jobs, want error %q", len(w.Jobs), tt.want)
			}
			if got, want := err.Error(), strings.NewReplacer("{WD}", wd, "{UP2}", filepath.Dir(filepath.Dir(wd)), "{UP}", filepath.Dir(wd)).Replace(tt.want); got != want {
				t.Errorf("Parse error\n got: %s\nwant: %s", got, want)
			}
			var perr *workflow.Error
			if !errors.As(err, &perr) {
				t.Fatalf("error %T is not a *workflow.Error", err)
			}
			if perr.File != "wf.yaml" || perr.Line < 1 {
				t.Errorf("Error{File: %q, Line: %d}, want wf.yaml and a line", perr.File, perr.Line)
			}
		})
	}
}
