package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// retryReport is what the retry tests read of a JSON report.
type retryReport struct {
	Jobs []struct {
		Labels   map[string]string `json:"labels"`
		Status   string            `json:"status"`
		Attempts []struct {
			Status     string `json:"status"`
			Error      string `json:"error"`
			ExitCode   *int   `json:"exit_code"`
			StderrTail string `json:"stderr_tail"`
			TimedOut   bool   `json:"timed_out"`
		} `json:"attempts"`
	} `json:"jobs"`
}

func readRetryReport(t *testing.T, path string) *retryReport {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r retryReport
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

func writeWorkflow(t *testing.T, dir, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// counted is a shell command that counts its runs in the file count,
// prints "run N" on stderr, and exits 1 for its first fails runs. It also
// writes out.txt first, which a failed run leaves for poolrun to remove,
// and fails if out.txt is there when it starts.
func counted(fails int) string {
	return fmt.Sprintf(`if [ -e out.txt ]; then echo "out.txt left from before" >&2; exit 9; fi; n=$(( $(cat count 2>/dev/null || echo 0) + 1 )); echo $n > count; echo "run $n" >&2; echo partial > out.txt; [ $n -gt %d ]`, fails)
}

// TestRunRetriesFailingCommand: a command that fails twice passes with
// retries: 2; the report lists its three runs, with the exit status and
// standard error of each; its outputs are removed between runs (the
// command fails if it finds them).
func TestRunRetriesFailingCommand(t *testing.T) {
	dir := t.TempDir()
	writeWorkflow(t, dir, `jobs:
  - id: flaky
    run: '`+counted(2)+`'
    outputs: [out.txt]
    retries: 2
`)
	r := poolrun(t, dir, "run", "-j", "2", "--quiet", "--report", "r.json", "wf.yaml")
	if r.code != 0 {
		t.Fatalf("exit %d, want 0\n%s", r.code, r.stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "count")); strings.TrimSpace(string(got)) != "3" {
		t.Errorf("the command ran %q times, want 3", got)
	}
	for _, want := range []string{
		`poolrun: job "flaky" (wf.yaml:2): exit status 1; running it again (attempt 2)`,
		`running it again (attempt 3)`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	rep := readRetryReport(t, filepath.Join(dir, "r.json"))
	if len(rep.Jobs) != 1 {
		t.Fatalf("%d jobs in the report", len(rep.Jobs))
	}
	j := rep.Jobs[0]
	if j.Status != "succeeded" || len(j.Attempts) != 3 {
		t.Fatalf("flaky: %s with %d attempts, want succeeded with 3: %+v", j.Status, len(j.Attempts), j.Attempts)
	}
	for i, a := range j.Attempts[:2] {
		if a.Status != "failed" || a.ExitCode == nil || *a.ExitCode != 1 || a.StderrTail != "run "+strconv.Itoa(i+1) {
			t.Errorf("attempt %d: %+v; want failed, exit 1, stderr run %d", i+1, a, i+1)
		}
	}
	if a := j.Attempts[2]; a.Status != "succeeded" || a.ExitCode != nil {
		t.Errorf("attempt 3: %+v, want succeeded", a)
	}
}

// TestRunRetriesExhausted: --retries 1 for every job; a command that
// always fails ends after 2 runs, the message saying so, and its outputs
// are gone; retries: 0 keeps a job from being retried.
func TestRunRetriesExhausted(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "once"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeWorkflow(t, dir, `jobs:
  - id: hopeless
    run: '`+counted(100)+`'
    outputs: [out.txt]
  - id: once
    run: 'cd once && `+counted(100)+`'
    retries: 0
`)
	r := poolrun(t, dir, "run", "-k", "-j", "2", "--quiet", "--retries", "1", "--report", "r.json", "wf.yaml")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, `poolrun: job "hopeless" (wf.yaml:2): failed after 2 attempts: exit status 1`) {
		t.Errorf("stderr does not say the job failed after 2 attempts:\n%s", r.stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "count")); strings.TrimSpace(string(got)) != "2" {
		t.Errorf("hopeless ran %q times, want 2", got)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "once", "count")); strings.TrimSpace(string(got)) != "1" {
		t.Errorf("once ran %q times, want 1 (retries: 0)", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "out.txt")); !os.IsNotExist(err) {
		t.Errorf("out.txt is still there after the job failed: %v", err)
	}
	rep := readRetryReport(t, filepath.Join(dir, "r.json"))
	for _, j := range rep.Jobs {
		want := map[string]int{"hopeless": 2, "once": 0}[j.Labels["id"]]
		if j.Status != "failed" || len(j.Attempts) != want {
			t.Errorf("%s: %s, %d attempts; want failed, %d", j.Labels["id"], j.Status, len(j.Attempts), want)
		}
	}
}

// TestRunRetriesTimeout: a run that passes its timeout is retried, each
// run with the whole timeout, after retry_delay; the report marks the
// timed-out run.
func TestRunRetriesTimeout(t *testing.T) {
	dir := t.TempDir()
	writeWorkflow(t, dir, `jobs:
  - id: slow-once
    run: 'if [ -e started ]; then echo done; else touch started; sleep 30; fi'
    timeout: 300ms
    retries: 1
    retry_delay: 50ms
`)
	r := poolrun(t, dir, "run", "-j", "1", "--quiet", "--report", "r.json", "wf.yaml")
	if r.code != 0 {
		t.Fatalf("exit %d, want 0\n%s", r.code, r.stderr)
	}
	rep := readRetryReport(t, filepath.Join(dir, "r.json"))
	if j := rep.Jobs[0]; len(j.Attempts) != 2 || !j.Attempts[0].TimedOut || j.Attempts[0].Status != "failed" || j.Attempts[1].Status != "succeeded" {
		t.Errorf("attempts %+v, want a timed-out one then a success", j.Attempts)
	}
}

// spanCommand records, under name in the folder spans, its start and end
// (nanoseconds of date +%s%N) and fails if another job's marker is in the
// folder running when it starts or ends: jobs that must not overlap check
// it themselves, without sleeping to synchronise.
func spanCommand(name string) string {
	return fmt.Sprintf(`mkdir -p running spans; s=$(date +%%s%%N); touch running/%[1]s; if [ "$(ls running | wc -l)" -ne 1 ]; then echo "%[1]s overlaps: $(ls running)" >&2; exit 3; fi; sleep 0.05; if [ "$(ls running | wc -l)" -ne 1 ]; then echo "%[1]s overlaps: $(ls running)" >&2; exit 3; fi; rm running/%[1]s; echo "$s $(date +%%s%%N)" > spans/%[1]s`, name)
}

// readSpans returns the recorded [start, end] of every job, by name.
func readSpans(t *testing.T, dir string) map[string][2]int64 {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "spans"))
	if err != nil {
		t.Fatal(err)
	}
	spans := map[string][2]int64{}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(dir, "spans", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var s, en int64
		if _, err := fmt.Sscan(string(data), &s, &en); err != nil {
			t.Fatalf("%s: %q: %v", e.Name(), data, err)
		}
		spans[e.Name()] = [2]int64{s, en}
	}
	return spans
}

// noOverlap fails when two of the spans overlap.
func noOverlap(t *testing.T, spans map[string][2]int64) {
	t.Helper()
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range spans {
			if !yield(n) {
				return
			}
		}
	})
	for i, a := range names {
		for _, b := range names[i+1:] {
			if sa, sb := spans[a], spans[b]; sa[0] < sb[1] && sb[0] < sa[1] {
				t.Errorf("%s (%v) and %s (%v) overlap", a, sa, b, sb)
			}
		}
	}
}

// TestRunThreads: threads: 2 jobs never overlap at -j 2; a threads: 3 job
// runs alone, with a warning; jobs of 1 thread still run two at a time.
func TestRunThreads(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("jobs:\n")
	for i := range 4 {
		fmt.Fprintf(&b, "  - id: wide-%d\n    threads: 2\n    run: '%s'\n", i, spanCommand(fmt.Sprint("wide-", i)))
	}
	fmt.Fprintf(&b, "  - id: huge\n    threads: 3\n    run: '%s'\n", spanCommand("huge"))
	writeWorkflow(t, dir, b.String())
	r := poolrun(t, dir, "run", "-j", "2", "--quiet", "wf.yaml")
	if r.code != 0 {
		t.Fatalf("exit %d, want 0\n%s", r.code, r.stderr)
	}
	if want := `poolrun run: wf.yaml:14: job "huge" has threads: 3, more than -j 2: it runs alone`; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
	}
	spans := readSpans(t, dir)
	if len(spans) != 5 {
		t.Fatalf("%d spans, want 5", len(spans))
	}
	noOverlap(t, spans)
}

// TestRunMem: jobs whose mem: sum passes --mem never overlap; without
// --mem they may (no limit), which a run of one-thread jobs that wait for
// each other shows.
func TestRunMem(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("jobs:\n")
	for i := range 4 {
		fmt.Fprintf(&b, "  - id: big-%d\n    mem: 600M\n    run: '%s'\n", i, spanCommand(fmt.Sprint("big-", i)))
	}
	writeWorkflow(t, dir, b.String())
	r := poolrun(t, dir, "run", "-j", "4", "--mem", "1G", "--quiet", "wf.yaml")
	if r.code != 0 {
		t.Fatalf("exit %d, want 0\n%s", r.code, r.stderr)
	}
	spans := readSpans(t, dir)
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4", len(spans))
	}
	noOverlap(t, spans)

	// Two jobs that can end only once both run: within --mem, they do.
	dir = t.TempDir()
	writeWorkflow(t, dir, `jobs:
  - id: a
    mem: 400M
    run: 'touch a; i=0; while [ ! -e b ]; do i=$((i+1)); [ $i -gt 3000 ] && exit 4; sleep 0.01; done'
  - id: b
    mem: 400M
    run: 'touch b; i=0; while [ ! -e a ]; do i=$((i+1)); [ $i -gt 3000 ] && exit 4; sleep 0.01; done'
`)
	start := time.Now()
	r = poolrun(t, dir, "run", "-j", "2", "--mem", "1G", "--quiet", "wf.yaml")
	if r.code != 0 {
		t.Fatalf("two jobs within --mem: exit %d, want 0 (after %v)\n%s", r.code, time.Since(start), r.stderr)
	}
}

// TestRunRetriesResourcesBadInput: each bad field or flag is refused
// with FILE:LINE (or the flag), exit status 2, and nothing runs.
func TestRunRetriesResourcesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, field string
		args        []string
		want        string
	}{
		{"zero threads", "threads: 0", nil, `wf.yaml:4: job "a": threads 0: want a whole number from 1 to 4096`},
		{"too many threads", "threads: 5000", nil, `wf.yaml:4: job "a": threads 5000: want a whole number from 1 to 4096`},
		{"bad mem", "mem: 2 apples", nil, `wf.yaml:4: job "a": mem "2 apples": want a size`},
		{"bad retry_delay", "retry_delay: soon", nil, `wf.yaml:4: job "a": retry_delay "soon" is not a duration`},
		{"negative retries", "retries: -2", nil, `wf.yaml:4: job "a": retries -2: want a whole number from 0 to 100`},
		{"bad --mem", "", []string{"--mem", "lots"}, `--mem`},
		{"negative --retries", "", []string{"--retries", "-1"}, `--retries -1`},
	} {
		t.Run(tc.name, func(t *testing.T) { refusedBeforeRun(t, "", tc.field, tc.args, tc.want) })
	}
}

// refusedBeforeRun runs poolrun run --quiet with args on a workflow of
// one job, a, that touches ran: top comes before its jobs: and field is
// a line of the job. It wants exit status 2, want on standard error, and
// no run of the job.
func refusedBeforeRun(t *testing.T, top, field string, args []string, want string) {
	t.Helper()
	dir := t.TempDir()
	wf := top + "jobs:\n  - id: a\n    run: touch ran\n"
	if field != "" {
		wf += "    " + field + "\n"
	}
	writeWorkflow(t, dir, wf)
	r := poolrun(t, dir, append(append([]string{"run", "--quiet"}, args...), "wf.yaml")...)
	if r.code != 2 {
		t.Errorf("exit %d, want 2\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the job ran")
	}
}
