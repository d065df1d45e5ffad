package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunTimeout: a job past its workflow timeout fails, whether its
// command stops at SIGTERM or not; the others succeed; the message names
// the job and the timeout.
func TestRunTimeout(t *testing.T) {
	dir := t.TempDir()
	wf := `jobs:
  - id: quick
    run: echo quick
  - id: slow
    run: sleep 30
    timeout: 500ms
  - id: stubborn
    run: trap '' TERM; sleep 30
    timeout: 500ms
`
	if err := os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(wf), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := poolrun(t, dir, "run", "-j", "2", "--quiet", "--report", "r.json", "wf.yaml")
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("run took %v", took)
	}
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	for _, want := range []string{`poolrun: job "slow" (wf.yaml:4): timed out after 500ms`, `poolrun: job "stubborn" (wf.yaml:7): timed out after 500ms`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	rep := readFaultReport(t, filepath.Join(dir, "r.json"))
	if got := rep.statuses(); got["quick"] != "succeeded" || got["slow"] != "failed" || got["stubborn"] != "failed" {
		t.Errorf("statuses %v", got)
	}
}

// TestRunRetries: with --retries, a job whose worker dies under it (its
// command kills the worker) runs again and succeeds; the report lists both
// attempts and the message says it runs again. poolrun run's local workers
// are goroutines of its own process, which a command that kills its parent
// kills whole (TestRunKilled), so the workers here are remote: poolrun
// worker -j 2 joins a pool that has none of its own, and the command kills
// the worker process it runs in (the pool sees its connection end).
func TestRunRetries(t *testing.T) {
	dir := t.TempDir()
	wf := `jobs:
  - id: fragile
    run: if [ ! -e died ]; then touch died; kill -9 $PPID; sleep 5; fi; echo ok
  - id: other
    run: echo other
`
	if err := os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(wf), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runWithRemoteWorkers(t, dir, "--retries", "2", "--quiet", "--report", "r.json", "wf.yaml")
	if r.code != 0 {
		t.Fatalf("exit %d, want 0\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, `poolrun: job "fragile": worker process died`) || !strings.Contains(r.stderr, "running it again (attempt 2)") {
		t.Errorf("stderr does not say the job runs again:\n%s", r.stderr)
	}
	rep := readFaultReport(t, filepath.Join(dir, "r.json"))
	if rep.Options.Retries != 2 {
		t.Errorf("report options: retries %d", rep.Options.Retries)
	}
	for _, j := range rep.Jobs {
		if j.Labels["id"] != "fragile" {
			continue
		}
		// A remote worker's death is the end of its connection: the
		// error says that, not "killed".
		if j.Status != "succeeded" || len(j.Attempts) != 2 || j.Attempts[0].Status != "aborted" ||
			!strings.Contains(j.Attempts[0].Error, "worker process died") || j.Attempts[1].Status != "succeeded" || j.Attempts[0].Worker < 1 {
			t.Errorf("fragile: %s, attempts %+v", j.Status, j.Attempts)
		}
	}
	// Without --retries the same job is Aborted and named.
	os.Remove(filepath.Join(dir, "died"))
	r = runWithRemoteWorkers(t, dir, "--quiet", "wf.yaml")
	if r.code != 1 || !strings.Contains(r.stderr, `job "fragile" (wf.yaml:2): aborted: worker process died`) {
		t.Errorf("without --retries: exit %d\n%s", r.code, r.stderr)
	}
}

// runWithRemoteWorkers runs poolrun run with args in dir with no local
// worker (-j 0 --listen on loopback) and poolrun worker -j 2 joined to it
// (its exit status is not looked at: one of its workers may be killed),
// and returns what the pool printed (stdout and stderr together, in
// stderr) and its exit status.
func runWithRemoteWorkers(t *testing.T, dir string, args ...string) result {
	t.Helper()
	joinFile := filepath.Join(dir, "run.join")
	pool, out := startPoolrun(t, dir, nil, append([]string{"run", "-j", "0", "--listen", "127.0.0.1:0", "--join-file", "run.join"}, args...)...)
	waitJoinFile(t, joinFile, out)
	poolrun(t, dir, "worker", "--join-file", joinFile, "-j", "2")
	err := pool.Wait()
	r := result{stderr: out.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("poolrun run %v: %v", args, err)
	}
	return r
}

type faultReport struct {
	Options struct {
		Retries int `json:"retries"`
	} `json:"options"`
	Jobs []struct {
		Labels   map[string]string `json:"labels"`
		Status   string            `json:"status"`
		Attempts []struct {
			Worker int    `json:"worker"`
			Status string `json:"status"`
			Error  string `json:"error"`
		} `json:"attempts"`
	} `json:"jobs"`
}

func readFaultReport(t *testing.T, path string) *faultReport {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r faultReport
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &r
}

func (r *faultReport) statuses() map[string]string {
	m := map[string]string{}
	for _, j := range r.Jobs {
		m[j.Labels["id"]] = j.Status
	}
	return m
}

// waitJoinFile waits up to a minute for the pool (whose output is out) to
// write its join file.
func waitJoinFile(t *testing.T, joinFile string, out *bytes.Buffer) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(joinFile); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no join file after a minute:\n%s", out)
		}
	}
}
