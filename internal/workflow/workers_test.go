package workflow_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/internal/workflow"
)

func TestParseWorkers(t *testing.T) {
	w, err := workflow.ParseWith("wf.yaml", yamlText(`
vars: {model: big}
workers:
  py:
    run: python3 score.py --model ${model}
    env: {B: "2", A: "${model}.bin"}
items:
  m: {worker: py}
  ref: {run: cp ref "$POOLRUN_ITEM"}
jobs:
  - id: score-${i}
    foreach: {i: 1..2}
    worker: py
    args: [--in, "in/${i} a.txt", ""]
    needs: [m, ref]
  - id: plain
    run: "true"
`), workflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Workers) != 1 {
		t.Fatalf("Workers = %d programs, want 1", len(w.Workers))
	}
	got := *w.Workers[0]
	want := workflow.Worker{Name: "py", Run: "python3 score.py --model big", Env: []string{"A=big.bin", "B=2"}, Line: 3}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Workers[0] = %+v, want %+v", got, want)
	}
	if it := w.Items[0]; it.Name != "m" || it.Worker != "py" || it.Run != "" {
		t.Errorf("Items[0] = %+v, want m held by py", it)
	}
	byID := map[string]*workflow.Job{}
	for _, j := range w.Jobs {
		byID[j.ID] = j
	}
	j := byID["score-2"]
	if j == nil || j.Worker != "py" || j.Run != "" || !reflect.DeepEqual(j.Args, []string{"--in", "in/2 a.txt", ""}) {
		t.Errorf("score-2 = %+v, want a request to py with its args", j)
	}
	if p := byID["plain"]; p.Worker != "" || p.Args != nil || p.Run != "true" {
		t.Errorf("plain = %+v, want a command", p)
	}
}

func TestParseWorkerErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"unknown program", `
jobs:
  - {id: a, worker: py}
`, `wf.yaml:2: job "a": worker "py": no such program in workers (the workflow defines none)`},
		{"unknown program, others defined", `
workers:
  r: {run: Rscript x.R}
  py: {run: python3 x.py}
jobs:
  - {id: a, worker: pyhton}
`, `wf.yaml:5: job "a": worker "pyhton": no such program in workers (it defines py, r)`},
		{"run and worker", `
workers: {py: {run: python3 x.py}}
jobs:
  - {id: a, run: x, worker: py}
`, `wf.yaml:3: job "a" has both run and worker: a job runs its command, or sends its args to a worker program`},
		{"args without worker", `
jobs:
  - {id: a, run: x, args: [y]}
`, `wf.yaml:2: job "a" has args but no worker: args are a request to a worker program (a command has them in its run)`},
		{"program without run", `
workers: {py: {env: {A: b}}}
jobs:
  - {id: a, run: x}
`, `wf.yaml:1: worker "py" has no run command`},
		{"program field", `
workers: {py: {run: x, cmd: y}}
jobs:
  - {id: a, run: x}
`, `wf.yaml:1: worker "py": unknown field "cmd" (a worker has run and env)`},
		{"bad env name", `
workers: {py: {run: x, env: {1A: b}}}
jobs:
  - {id: a, run: x}
`, `wf.yaml:1: worker "py": env: "1A" is not a variable name: use letters, digits and _, not starting with a digit`},
		{"item of another program's", `
workers:
  py: {run: python3 x.py}
items:
  m: {worker: py}
jobs:
  - {id: a, run: x, needs: [m]}
`, `wf.yaml:6: job "a": needs "m": the item is held by worker program "py" (line 4), and only that program's jobs (worker: py) can need it`},
		{"item with run and worker", `
workers: {py: {run: x}}
items:
  m: {run: x, worker: py}
jobs:
  - {id: a, run: x}
`, `wf.yaml:3: item "m" has both run and worker: an item is built by its run command, or held by a worker program`},
		{"item of an unknown program", `
items:
  m: {worker: py}
jobs:
  - {id: a, run: x}
`, `wf.yaml:2: item "m": worker "py": no such program in workers (the workflow defines none)`},
		{"args unknown variable", `
workers: {py: {run: x}}
jobs:
  - {id: a, worker: py, args: ["${i}"]}
`, `wf.yaml:3: job "a": args: unknown variable ${i} (the job has no foreach)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := workflow.Parse("wf.yaml", yamlText(tt.in))
			if err == nil {
				t.Fatalf("Parse succeeded, want %q", tt.want)
			}
			if got := err.Error(); got != tt.want && !strings.HasPrefix(got, tt.want+"\n") {
				t.Errorf("Parse error\n got: %s\nwant: %s", got, tt.want)
			}
		})
	}
}
