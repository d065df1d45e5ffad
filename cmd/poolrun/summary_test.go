package main_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// allSucceeded matches the line at the end of a run whose jobs all
// succeeded: N jobs, N succeeded.
var allSucceeded = regexp.MustCompile(`(?m)^(\d+) jobs: (\d+) succeeded; wall time `)

// summaryFlow has a job that allocates 96 MiB, one that takes 1.5 s (the
// run takes long enough for its slowest jobs to be named), one that
// fails, with twelve jobs after it, and one with an output, skipped on a
// second run.
const summaryFlow = `jobs:
  - {id: big, run: 'dd if=/dev/zero of=/dev/null bs=96M count=1 2>/dev/null'}
  - {id: slow, run: 'sleep 1.5'}
  - id: bad
    run: 'echo "cc: error: foo.c: No such file" >&2; exit 2'
  - id: dep-${i}
    foreach: {i: 1..12}
    run: 'true'
    after: [bad]
  - {id: made, run: 'echo ok > made.txt', outputs: [made.txt]}
`

// The end of a poolrun run is the workflow's, on standard error: how many
// jobs succeeded, were skipped, failed and were cancelled; the failed job
// with its exit status, after the detailed message; the cancelled jobs,
// the first ten and how many more; the slowest jobs; the largest
// command's peak RSS; then the verdict, which names the failed job. No
// table of workers that are goroutines of poolrun, and no cache figures
// for a workflow without items; standard output is the commands' alone.
func TestRunEndIsTheWorkflows(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.yaml": summaryFlow})
	// -k: the jobs that do not need the failed one go on.
	if r := poolrun(t, dir, "run", "-k", "-j", "3", "wf.yaml"); r.code != 1 {
		t.Fatalf("first run: exit %d, want 1\n%s", r.code, r.stderr)
	}
	r := poolrun(t, dir, "run", "-k", "-j", "3", "wf.yaml")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("standard output holds more than the commands':\n%s", r.stdout)
	}
	for _, want := range []string{
		"poolrun: job \"bad\" (wf.yaml:4): exit status 2\n    cc: error: foo.c: No such file\n",
		"\n16 jobs: 2 succeeded, 1 skipped (up to date), 1 failed, 12 cancelled; wall time ",
		"\nfailed: bad (wf.yaml:4): exit status 2\n",
		"\ncancelled: dep-1, dep-2, dep-3, dep-4, dep-5, dep-6, dep-7, dep-8, dep-9, dep-10 and 2 more\n",
		"\nslowest: slow 1.",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	m := regexp.MustCompile(`\npeak RSS: big ([0-9.]+) MiB, the most of any command\n`).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Errorf("stderr does not give big's peak RSS:\n%s", r.stderr)
	} else if mib, err := strconv.ParseFloat(m[1], 64); err != nil || mib < 96 {
		t.Errorf("big's peak RSS is %s MiB, want at least 96", m[1])
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if last, want := lines[len(lines)-1], "poolrun run: 1 job failed: bad (exit status 2)"; last != want {
		t.Errorf("last line %q, want %q", last, want)
	}
	for _, not := range []string{"pid", "window published", "stale items", "cache:", "items:"} {
		if strings.Contains(r.stderr, not) {
			t.Errorf("stderr says %q, of a workflow without items:\n%s", not, r.stderr)
		}
	}
}

// A workflow with items ends with the cache's figures, still without a
// table of the workers, which are goroutines of poolrun; the last line
// of a run that succeeded says how its jobs ended.
func TestRunEndWithItems(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.yaml": `items:
  ref: {run: 'echo data > "$POOLRUN_ITEM"'}
jobs:
  - {id: a, run: 'cat "$POOLRUN_ITEM_REF"', needs: [ref]}
  - {id: b, run: 'cat "$POOLRUN_ITEM_REF"', needs: [ref]}
`})
	r := mustRun(t, dir, "run", "-j", "1", "wf.yaml")
	if !regexp.MustCompile(`(?m)^items: 1 built, 1 hits, 1 evicted; build time \S+; window published \d+ times\ncache: the workers held at most `).MatchString(r.stderr) {
		t.Errorf("stderr does not give the items' figures:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr, "pid") {
		t.Errorf("stderr has a table of the workers:\n%s", r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "2 jobs: 2 succeeded; wall time ") {
		t.Errorf("last line %q, want how the jobs ended", last)
	}
}

// interruptFlow's job slow writes its output, then runs until it is
// interrupted; later runs after it.
const interruptFlow = `jobs:
  - {id: fast, run: 'echo ok > fast.txt', outputs: [fast.txt]}
  - {id: slow, run: 'echo half > slow.txt; sleep 30', outputs: [slow.txt], after: [fast]}
  - {id: later, run: 'echo x > later.txt', outputs: [later.txt], after: [slow]}
`

// A job interrupted by SIGINT or SIGTERM has what it wrote removed, and
// named: in its message, which says it was interrupted, and in its error
// in the report; the end of the run names it and the job that did not
// start.
func TestRunInterruptNamesRemoved(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"wf.yaml": interruptFlow})
			cmd := exec.Command(poolrunBin, "run", "-j", "2", "--report", "report.json", "wf.yaml")
			cmd.Dir = dir
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(filepath.Join(dir, "slow.txt")); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the slow job did not start within a minute")
				}
			}
			cmd.Process.Signal(sig)
			cmd.Wait()
			if code := cmd.ProcessState.ExitCode(); code != 130 {
				t.Errorf("exit %d, want 130\n%s", code, stderr.String())
			}
			if _, err := os.Lstat(filepath.Join(dir, "slow.txt")); err == nil {
				t.Error("slow.txt, the output of the interrupted job, is still there")
			}
			for _, want := range []string{
				"poolrun: job \"slow\" (wf.yaml:3): interrupted\n    poolrun removed what the job wrote: slow.txt\n",
				"\ncancelled: later\ninterrupted: slow\n3 jobs: 1 succeeded, 1 interrupted, 1 cancelled; wall time ",
			} {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
				}
			}
			if got := reportError(t, filepath.Join(dir, "report.json"), "slow"); !strings.HasSuffix(got, "\npoolrun removed what the job wrote: slow.txt") {
				t.Errorf("the report's error of slow is %q; want it to name what was removed", got)
			}
		})
	}
}

// A job that passes its timeout has what it wrote removed, and named in
// its message as in the report.
func TestRunTimeoutNamesRemoved(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.yaml": `jobs:
  - {id: late, run: 'echo half > late.txt; sleep 30', outputs: [late.txt], timeout: 300ms}
`})
	r := poolrun(t, dir, "run", "--report", "report.json", "wf.yaml")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	if want := "poolrun: job \"late\" (wf.yaml:2): timed out after 300ms\n    poolrun removed what the job wrote: late.txt\n"; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
	}
	if got := reportError(t, filepath.Join(dir, "report.json"), "late"); !strings.Contains(got, "\npoolrun removed what the job wrote: late.txt") {
		t.Errorf("the report's error of late is %q; want it to name what was removed", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, "late.txt")); err == nil {
		t.Error("late.txt, the output of the job that timed out, is still there")
	}
}

// reportError returns the error of the job of workflow id id in the
// report at path.
func reportError(t *testing.T, path, id string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Jobs []struct {
			JobID string `json:"job_id"`
			Error string `json:"error"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, j := range rep.Jobs {
		if j.JobID == id {
			return j.Error
		}
	}
	t.Fatalf("%s: no job %q", path, id)
	return ""
}
