package execflow_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/shm"
)

// roleProgram is a persistent worker program written to Bazel's JSON
// protocol alone, as a Bazel worker is: it appends "start PID", "end
// PID" and "req PID ARGS" lines to $PROG_LOG, and its requests say what
// to do: "echo WORDS" answers them, "fail N" answers exit code N, "die"
// exits with status 7 unanswered, "garbage" answers a line that is not
// JSON, "touch PATH" makes the file PATH, "hang" never answers, "window NAME" answers whether the window lists NAME's key of
// $POOLRUN_PROGRAM_ITEMS.
func roleProgram() int {
	if !slices.Contains(os.Args[1:], "--persistent_worker") {
		fmt.Fprintln(os.Stderr, "program: no --persistent_worker in", os.Args)
		return 2
	}
	logf, err := os.OpenFile(os.Getenv("PROG_LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	pid := os.Getpid()
	say := func(format string, args ...any) { fmt.Fprintf(logf, format+"\n", args...) }
	say("start %d", pid)
	defer say("end %d", pid)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var req struct {
			Arguments []string `json:"arguments"`
			RequestID int      `json:"requestId"`
		}
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintln(os.Stderr, "program: bad request:", err)
			return 2
		}
		say("req %d %s", pid, strings.Join(req.Arguments, " "))
		resp := map[string]any{"requestId": req.RequestID}
		args := append(req.Arguments, "", "")
		switch args[0] {
		case "echo":
			resp["output"] = strings.Join(req.Arguments[1:], " ")
		case "fail":
			resp["exitCode"], _ = strconv.Atoi(args[1])
			resp["output"] = "failing as asked"
		case "die":
			fmt.Fprintln(os.Stderr, "program: dying as asked")
			return 7
		case "touch":
			if err := os.WriteFile(args[1], nil, 0o644); err != nil {
				resp["exitCode"], resp["output"] = 1, err.Error()
			}
		case "hang":
			time.Sleep(time.Hour) // until killed
		case "garbage":
			fmt.Println("not a response")
			continue
		case "window":
			resp["output"] = windowLists(args[1])
		}
		line, _ := json.Marshal(resp)
		os.Stdout.Write(append(line, '\n'))
	}
	return 0
}

// windowLists says whether the window of $POOLRUN_WINDOW_FD lists item
// name's key of $POOLRUN_PROGRAM_ITEMS: "listed", "absent", or why it cannot
// tell.
func windowLists(name string) string {
	var key uint64
	for kv := range strings.SplitSeq(os.Getenv("POOLRUN_PROGRAM_ITEMS"), ",") {
		if n, k, _ := strings.Cut(kv, "="); n == name {
			key, _ = strconv.ParseUint(k, 16, 64)
		}
	}
	fd, err := strconv.Atoi(os.Getenv("POOLRUN_WINDOW_FD"))
	if key == 0 || err != nil {
		return fmt.Sprintf("no key or descriptor: %q, %q", os.Getenv("POOLRUN_PROGRAM_ITEMS"), os.Getenv("POOLRUN_WINDOW_FD"))
	}
	w, err := shm.Open(os.NewFile(uintptr(fd), "window"))
	if err != nil {
		return err.Error()
	}
	defer w.Close()
	s, err := w.Snapshot(nil)
	if err != nil {
		return err.Error()
	}
	if s.Contains(key) {
		return "listed"
	}
	return "absent"
}

// programFlow writes a workflow whose program is this test binary in
// roleProgram, logging to log, with body after its workers and items.
func programFlow(t *testing.T, log, body string) string {
	t.Helper()
	return fmt.Sprintf(`workers:
  prog:
    run: %s
    env: {EXECFLOW_TEST_ROLE: program, PROG_LOG: %q}
items:
  model: {worker: prog}
%s`, os.Args[0], log, body)
}

// programLog reads a roleProgram log: its lines by kind, the pids of
// "start" and "end", the requests as "PID ARGS".
func programLog(t *testing.T, path string) (starts, ends, reqs []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		kind, rest, _ := strings.Cut(line, " ")
		switch kind {
		case "start":
			starts = append(starts, rest)
		case "end":
			ends = append(ends, rest)
		case "req":
			reqs = append(reqs, rest)
		}
	}
	return starts, ends, reqs
}

// TestProgramRequests runs the jobs of a program written to Bazel's
// protocol alone: each worker starts it once, sends it the jobs' args,
// passes its responses' output on, and ends it at the end.
func TestProgramRequests(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			log := filepath.Join(dir, "prog.log")
			wf := parse(t, "wf.yaml", programFlow(t, log, `jobs:
  - id: echo-${i}
    foreach: {i: 1..6}
    worker: prog
    args: [echo, "hello ${i}", "a b"]
    needs: [model]
  - id: window
    worker: prog
    args: [window, model]
    needs: [model]
    after: [echo-*]
`))
			logs := t.TempDir()
			jobs, err := run(t, wf, m.workers, execflow.Options{Dir: dir, Stdio: execflow.Stdio{LogDir: logs}})
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= 6; i++ {
				got, err := os.ReadFile(filepath.Join(logs, fmt.Sprintf("echo-%d.out", i)))
				if want := fmt.Sprintf("hello %d a b\n", i); err != nil || string(got) != want {
					t.Errorf("echo-%d's output: %q, %v; want %q", i, got, err, want)
				}
			}
			if got, _ := os.ReadFile(filepath.Join(logs, "window.out")); string(got) != "listed\n" {
				t.Errorf("the program reads the window: %q, want listed (it holds model for the job)", got)
			}
			starts, ends, reqs := programLog(t, log)
			if most := max(m.workers, 1); len(starts) < 1 || len(starts) > most {
				t.Errorf("%d program processes for %d workers: %v", len(starts), most, starts)
			}
			slices.Sort(starts)
			slices.Sort(ends)
			if !slices.Equal(starts, ends) {
				t.Errorf("programs started %v, ended %v: want each ended", starts, ends)
			}
			if len(reqs) != 7 {
				t.Errorf("%d requests, want 7: %v", len(reqs), reqs)
			}
			if r, _ := jobs["echo-1"].Result(); r.PeakRSS <= 0 {
				t.Errorf("echo-1's peak RSS is %d, want the program's", r.PeakRSS)
			}
		})
	}
}

// TestProgramEnds: once no unfinished job needs the program, the worker
// ends it before its next job, a command.
func TestProgramEnds(t *testing.T) {
	for _, m := range modes[:2] { // one worker: the next job is its own
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			log := filepath.Join(dir, "prog.log")
			wf := parse(t, "wf.yaml", programFlow(t, log, `jobs:
  - {id: a, worker: prog, args: [echo, a]}
  - {id: b, worker: prog, args: [echo, b], after: [a]}
  - {id: after, run: cp prog.log seen.log, after: [b]}
`))
			if _, err := run(t, wf, m.workers, execflow.Options{Dir: dir, Stdio: execflow.Stdio{LogDir: t.TempDir()}}); err != nil {
				t.Fatal(err)
			}
			starts, ends, _ := programLog(t, filepath.Join(dir, "seen.log"))
			if len(starts) != 1 || !slices.Equal(starts, ends) {
				t.Errorf("when the command ran, programs started %v and ended %v: want one, ended", starts, ends)
			}
		})
	}
}

// TestProgramDies: a program that dies during a request fails its job
// with its exit status, and the next request (the job's retry, then the
// next job) starts it again; an answer that is not JSON fails its job
// and ends the program.
func TestProgramDies(t *testing.T) {
	for _, m := range modes[:2] {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			log := filepath.Join(dir, "prog.log")
			wf := parse(t, "wf.yaml", programFlow(t, log, `jobs:
  - {id: first, worker: prog, args: [echo, x]}
  - {id: die, worker: prog, args: [die], retries: 1, after: [first]}
  - {id: fail, worker: prog, args: [fail, "3"], after: [first]}
  - {id: garbage, worker: prog, args: [garbage], after: [first]}
  - {id: last, worker: prog, args: [echo, y], after: [first]}
`))
			jobs, _ := run(t, wf, m.workers, execflow.Options{Dir: dir, Stdio: execflow.Stdio{LogDir: t.TempDir()}})
			if _, err := jobs["die"].Result(); err == nil || !strings.Contains(err.Error(), "exit status 7") {
				t.Errorf("die: %v, want exit status 7", err)
			}
			if got := len(jobs["die"].Attempts()); got != 2 {
				t.Errorf("die ran %d times, want 2", got)
			}
			f, ok := execflow.FailureOf(errOf(jobs["fail"]))
			if !ok || f.ExitCode != 3 {
				t.Errorf("fail: %+v, %v; want exit code 3", f, errOf(jobs["fail"]))
			}
			if err := errOf(jobs["garbage"]); err == nil || !strings.Contains(err.Error(), `not a WorkResponse with requestId 0: "not a response"`) {
				t.Errorf("garbage: %v, want the line quoted", err)
			}
			if err := errOf(jobs["last"]); err != nil {
				t.Errorf("last: %v", err)
			}
			// first's program dies in die, and die's retry starts one
			// that dies; garbage's is ended; last's comes after it. None
			// is left.
			starts, _, _ := programLog(t, log)
			if len(starts) < 4 {
				t.Errorf("programs started %v, want at least 4", starts)
			}
			for _, s := range starts {
				if pid, _ := strconv.Atoi(s); syscall.Kill(pid, 0) != syscall.ESRCH {
					t.Errorf("program %d is still there", pid)
				}
			}
		})
	}
}

func errOf[R any](j interface{ Result() (R, error) }) error {
	_, err := j.Result()
	return err
}

// TestProgramTimeout: a job whose program does not answer within the
// job's timeout fails, and its program is killed (TestProgramDies has
// the next job start another).
func TestProgramTimeout(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "prog.log")
	wf := parse(t, "wf.yaml", programFlow(t, log, `jobs:
  - {id: hang, worker: prog, args: [hang], timeout: 1s}
`))
	p := engine.New(engine.Workers(1))
	jobs, err := execflow.Queue(p, wf, execflow.Options{Dir: dir, Stdio: execflow.Stdio{LogDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	p.Run(ctx)
	if err := errOf(jobs["hang"]); err == nil || !strings.Contains(err.Error(), "timed out after 1s") {
		t.Errorf("hang: %v, want its timeout", err)
	}
	starts, _, _ := programLog(t, log)
	if len(starts) != 1 {
		t.Fatalf("programs started %v, want 1", starts)
	}
	for _, s := range starts {
		if pid, _ := strconv.Atoi(s); syscall.Kill(pid, 0) != syscall.ESRCH {
			t.Errorf("program %d is still there", pid)
		}
	}
}

// TestProgramRerun: a request with outputs is up to date once it has made
// them, and runs again when its args or its program's command line
// change, as a command does when it changes.
func TestProgramRerun(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	log := filepath.Join(dir, "prog.log")
	flow := func(arg, env string) string {
		text := programFlow(t, log, `jobs:
  - {id: a, worker: prog, args: [touch, a.txt, `+arg+`], outputs: [a.txt]}
`)
		return strings.Replace(text, "PROG_LOG:", "X: "+env+", PROG_LOG:", 1)
	}
	decide := func(text string) string {
		wf := parse(t, "wf.yaml", text)
		p, err := execflow.NewPlan(wf, execflow.PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return decisions(p)["a"]
	}
	text := flow("one", "x")
	wf := parse(t, "wf.yaml", text)
	p, err := execflow.NewPlan(wf, execflow.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Begin(); err != nil {
		t.Fatal(err)
	}
	jobs, err := run(t, wf, 0, execflow.Options{Dir: dir, Plan: p, Stdio: execflow.Stdio{LogDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Save(jobs); err != nil {
		t.Fatal(err)
	}
	if got := decide(text); got != "skip: up to date" {
		t.Errorf("the same request: %q, want up to date", got)
	}
	if got := decide(flow("two", "x")); !strings.HasPrefix(got, "run: ") || !strings.Contains(got, "command") {
		t.Errorf("other args: %q, want a run, its command changed", got)
	}
	if got := decide(flow("one", "y")); !strings.HasPrefix(got, "run: ") || !strings.Contains(got, "command") {
		t.Errorf("another environment of its program: %q, want a run, its command changed", got)
	}
}
