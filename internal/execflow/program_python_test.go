package execflow_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/internal/execflow"
)

// pythonFlow writes the workflow of TestPythonProgram: the programs of
// testdata (items_worker.py with python/poolrun.py on its PYTHONPATH,
// logging to log; bazel_worker.py) and body.
func pythonFlow(t *testing.T, log, body string) string {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the Python worker programs are not tested")
	}
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	return fmt.Sprintf(`workers:
  py:
    run: python3 %s
    env: {PROG_LOG: %q, PYTHONPATH: %q}
  bazel:
    run: python3 %s
items:
  first: {worker: py}
  second: {worker: py}
%s`, abs("testdata/items_worker.py"), log, abs(filepath.Join("..", "..", "python")), abs("testdata/bazel_worker.py"), body)
}

// pyLog is an items_worker.py log: its lines, each split into words.
func pyLog(t *testing.T, path string) [][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		out = append(out, strings.Fields(line))
	}
	return out
}

// TestPythonProgram: two phases of jobs of a program written with
// python/poolrun.py, each phase needing one item the program holds. Each
// program process builds each item once, frees the first item during the
// second phase, and is ended once no job needs it; a program written to
// Bazel's protocol alone runs unchanged.
func TestPythonProgram(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			log := filepath.Join(dir, "prog.log")
			wf := parse(t, "wf.yaml", pythonFlow(t, log, `jobs:
  - {id: "a-${i}", foreach: {i: 1..4}, worker: py, args: [first], needs: [first]}
  - {id: "b-${i}", foreach: {i: 1..4}, worker: py, args: [second], needs: [second], after: ["a-*"]}
  - {id: bazel, worker: bazel, args: [x, "y z"]}
  - {id: after, run: cp prog.log seen.log, after: ["b-*"]}
`))
			logs := t.TempDir()
			if _, err := run(t, wf, m.workers, execflow.Options{Dir: dir, Stdio: execflow.Stdio{LogDir: logs}}); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(filepath.Join(logs, "bazel.out")); string(got) != "bazel x y z\n" {
				t.Errorf("the Bazel worker's output: %q, want %q", got, "bazel x y z\n")
			}
			if got, _ := os.ReadFile(filepath.Join(logs, "b-1.out")); string(got) != "done second\n" {
				t.Errorf("b-1's output: %q, want what the handler printed", got)
			}
			builds := map[string]int{}   // "PID NAME"
			freed := map[string]int{}    // "PID NAME": its line
			lastReq := map[string]int{}  // PID: the line of its last request for second
			started := map[string]bool{} // PID
			ended := map[string]bool{}
			lines := pyLog(t, log)
			for i, l := range lines {
				switch l[0] {
				case "start":
					started[l[1]] = true
				case "end":
					ended[l[1]] = true
				case "build":
					builds[l[1]+" "+l[2]]++
				case "free":
					freed[l[1]+" "+l[2]] = i
				case "req":
					if l[2] == "second" {
						lastReq[l[1]] = i
					}
				}
			}
			if most := max(m.workers, 1); len(started) > most {
				t.Errorf("%d program processes for %d workers", len(started), most)
			}
			for k, n := range builds {
				if n != 1 {
					t.Errorf("%s built %d times in its process, want once", k, n)
				}
			}
			for pid := range started {
				if !ended[pid] {
					t.Errorf("program %s did not end", pid)
				}
				at, ok := freed[pid+" first"]
				if builds[pid+" first"] == 1 && !ok {
					t.Errorf("program %s built first and never freed it", pid)
				}
				if last, ok := lastReq[pid]; ok && builds[pid+" first"] == 1 && at > last {
					t.Errorf("program %s freed first (line %d) after its last request of the second phase (line %d): %v", pid, at, last, lines)
				}
			}
			if m.workers <= 1 {
				// One worker: its check before the command ended the program.
				for _, l := range pyLog(t, filepath.Join(dir, "seen.log")) {
					if l[0] == "start" && !strings.Contains(readFile(t, filepath.Join(dir, "seen.log")), "end "+l[1]) {
						t.Errorf("program %s had not ended when the command after it ran", l[1])
					}
				}
			}
		})
	}
}

// TestPythonProgramKilled: a program killed in the middle of a request
// fails that run of its job, which its retry runs again in a new
// program; the next job uses that one.
func TestPythonProgramKilled(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "prog.log")
	wf := parse(t, "wf.yaml", pythonFlow(t, log, `jobs:
  - {id: killed, worker: py, args: [first, die-once], needs: [first], retries: 1}
  - {id: next, worker: py, args: [first], needs: [first], after: [killed]}
`))
	jobs, err := run(t, wf, 1, execflow.Options{Dir: dir, Stdio: execflow.Stdio{LogDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	at := jobs["killed"].Attempts()
	if len(at) != 2 || at[0].Err == nil || !strings.Contains(at[0].Err.Error(), "SIGKILL") {
		t.Errorf("killed's attempts: %+v, want a first one killed by SIGKILL, then one that succeeds", at)
	}
	starts := 0
	for _, l := range pyLog(t, log) {
		if l[0] == "start" {
			starts++
		}
	}
	if starts != 2 {
		t.Errorf("%d programs started, want 2 (the one killed, and the one of the retry and the next job)", starts)
	}
}
