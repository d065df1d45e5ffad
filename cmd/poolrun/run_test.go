package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/proctest"
)

func TestRunExamples(t *testing.T) {
	t.Parallel()
	examples, _ := filepath.Glob("../../examples/*.yaml")
	if len(examples) == 0 {
		t.Fatal("no examples")
	}
	for _, ex := range examples {
		if strings.HasPrefix(filepath.Base(ex), "scaffold-") {
			continue // a scaffold configuration: TestScaffoldExamples
		}
		t.Run(filepath.Base(ex), func(t *testing.T) {
			// A copy: the commands run in the workflow file's folder.
			data, err := os.ReadFile(ex)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(ex)), data, 0o644); err != nil {
				t.Fatal(err)
			}
			r := poolrun(t, dir, "run", "-j", "2", filepath.Base(ex))
			if r.code != 0 {
				t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			if m := allSucceeded.FindStringSubmatch(r.stderr); m == nil || m[1] != m[2] {
				t.Errorf("summary:\n%s", r.stderr)
			}
		})
	}
}

// Each kind of bad workflow is refused before anything runs, with FILE:LINE
// and exit status 2. Every job would create a file named after it.
func TestRunBadInput(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"duplicate id", "jobs:\n  - id: a\n    run: touch ran-a\n  - id: a\n    run: touch ran-a2\n", `wf.yaml:4: duplicate job id "a"`},
		{"unknown dependency", "jobs:\n  - id: a\n    run: touch ran-a\n    after: [nope]\n", "wf.yaml:4:"},
		{"cycle", "jobs:\n  - id: a\n    run: touch ran-a\n    after: [b]\n  - id: b\n    run: touch ran-b\n    after: [a]\n", "cycle"},
		{"unknown item", "jobs:\n  - id: a\n    run: touch ran-a\n    needs: [ref]\n", "wf.yaml:4:"},
		{"bad foreach", "jobs:\n  - id: a-${i}\n    run: touch ran-${i}\n    foreach: {i: 5..1}\n", "wf.yaml:4:"},
		{"yaml error", "jobs:\n  - id: a\n    run: [touch ran-a\n", "wf.yaml:"},
		{"unknown field", "jobs:\n  - id: a\n    run: touch ran-a\n    colour: red\n", `wf.yaml:4:`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(c.yaml), 0o644)
			r := poolrun(t, dir, "run", "wf.yaml")
			if r.code != 2 {
				t.Errorf("exit %d, want 2", r.code)
			}
			if !strings.Contains(r.stderr, c.want) {
				t.Errorf("stderr %q does not contain %q", r.stderr, c.want)
			}
			if ran, _ := filepath.Glob(filepath.Join(dir, "ran-*")); len(ran) > 0 {
				t.Errorf("jobs ran: %v", ran)
			}
		})
	}
	if r := poolrun(t, t.TempDir(), "run", "no-such-file.yaml"); r.code != 2 || !strings.Contains(r.stderr, "no-such-file.yaml") {
		t.Errorf("missing file: exit %d, %s", r.code, r.stderr)
	}
}

func TestRunFailingCommand(t *testing.T) {
	dir := t.TempDir()
	wf := "jobs:\n  - id: fine\n    run: echo fine\n  - id: bad\n    run: echo 'disk on fire' >&2; exit 3\n  - id: later\n    run: touch ran-later\n    after: [bad]\n"
	os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(wf), 0o644)
	r := poolrun(t, dir, "run", "-j", "2", "--report", "report.json", "wf.yaml")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, `job "bad" (wf.yaml:4): exit status 3`) || !strings.Contains(r.stderr, "disk on fire") {
		t.Errorf("stderr does not report the failure:\n%s", r.stderr)
	}
	var rep struct {
		Jobs []struct {
			Labels map[string]string `json:"labels"`
			Status string            `json:"status"`
			Error  string            `json:"error"`
		} `json:"jobs"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, j := range rep.Jobs {
		status[j.Labels["id"]] = j.Status
		if j.Labels["id"] == "bad" && (!strings.Contains(j.Error, "exit status 3") || !strings.Contains(j.Error, "disk on fire")) {
			t.Errorf("report: the failed job's error is %q", j.Error)
		}
	}
	if status["fine"] != "succeeded" || status["bad"] != "failed" || status["later"] != "cancelled" {
		t.Errorf("report statuses: %v", status)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran-later")); err == nil {
		t.Error("the dependent of the failed job ran")
	}
}

// TestRunInterrupt interrupts a workflow whose job runs a long command with
// a child of its own and needs an item: exit status 130, and no worker, no
// command and no scratch folder left.
func TestRunInterrupt(t *testing.T) {
	dir := t.TempDir()
	wf := `items:
  big:
    run: head -c 100000 /dev/zero > "$POOLRUN_ITEM"
jobs:
  - id: long
    needs: [big]
    run: echo $$ > long.pid; sleep 30 & sleep 30; wait
`
	cmd, shell := startLongJob(t, dir, wf, "--report", "report.json")
	// run's workers are goroutines of poolrun: its children are the
	// command's shell and the janitor, and the scratch folder is poolrun's.
	workers := proctest.Children(cmd.Process.Pid)
	scratch := scratchFolders([]int{cmd.Process.Pid})
	if len(scratch) == 0 {
		t.Errorf("no scratch folder for poolrun (pid %d)", cmd.Process.Pid)
	}
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit status %d, want 130", code)
	}
	if left := proctest.WaitGone(append(workers, shell), 10*time.Second); len(left) > 0 {
		t.Errorf("processes %v outlived poolrun (workers %v, shell %d)", left, workers, shell)
	}
	for _, f := range scratch {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("scratch folder %s left behind", f)
		}
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, ".*.tmp*")); len(tmp) > 0 {
		t.Errorf("half-written files left: %v", tmp)
	}
}

// scratchFolders returns the scratch folders of the given processes
// (poolrun's, for run; its workers', for scaffold).
func scratchFolders(pids []int) []string {
	var out []string
	for _, root := range []string{os.TempDir(), "/dev/shm"} {
		for _, pid := range pids {
			m, _ := filepath.Glob(filepath.Join(root, "poolrun-"+strconv.Itoa(pid)+"-*"))
			out = append(out, m...)
		}
	}
	return out
}

// TestRunKilled kills poolrun itself with SIGKILL while a job's command
// (with a child of its own) runs: none of its children (the command's
// shell, the janitor) and no process of the command may outlive it by more
// than a second.
func TestRunKilled(t *testing.T) {
	dir := t.TempDir()
	wf := "jobs:\n  - id: long\n    run: echo $$ > long.pid; sleep 30 & sleep 30; wait\n"
	cmd, shell := startLongJob(t, dir, wf)
	workers := proctest.Children(cmd.Process.Pid)
	sleeps := proctest.Children(shell)
	if len(workers) == 0 || len(sleeps) == 0 {
		t.Fatalf("workers %v, the command's children %v", workers, sleeps)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	killed := time.Now()
	all := append(append(workers, shell), sleeps...)
	left := proctest.WaitGone(all, 10*time.Second)
	gone := time.Since(killed)
	t.Logf("workers and commands gone %v after poolrun was killed", gone.Round(time.Millisecond))
	if len(left) > 0 || gone > time.Second {
		t.Errorf("processes outlived the killed poolrun by %v (still there: %v; workers %v, shell %d, its children %v)", gone.Round(time.Millisecond), left, workers, shell, sleeps)
	}
}

// startLongJob starts "poolrun run -j 2 --quiet [args] wf.yaml" in dir on
// the workflow wf, whose job writes its shell's pid to long.pid, and waits
// for that pid. The process is killed at the end of the test.
func startLongJob(t *testing.T, dir, wf string, args ...string) (*exec.Cmd, int) {
	t.Helper()
	os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(wf), 0o644)
	cmd := exec.Command(poolrunBin, append(append([]string{"run", "-j", "2", "--quiet"}, args...), "wf.yaml")...)
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		data, _ := os.ReadFile(filepath.Join(dir, "long.pid"))
		if shell, _ := strconv.Atoi(strings.TrimSpace(string(data))); shell > 0 {
			return cmd, shell
		}
	}
	t.Fatal("the job did not start within a minute")
	return nil, 0
}

// TestRunKeepsUsersFolders is the data-loss bug of issue 11: a folder of
// the user's in the scratch root whose name looks like a scratch folder of
// a dead process survives a run.
func TestRunKeepsUsersFolders(t *testing.T) {
	root := execflow.DefaultScratch()
	dir, err := os.MkdirTemp(root, "poolrun-2025-results")
	if err != nil {
		t.Skip("cannot write to the scratch root:", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o700)
	data := filepath.Join(dir, "data.csv")
	if err := os.WriteFile(data, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	os.WriteFile(filepath.Join(work, "ok.yaml"), []byte("jobs:\n  - id: a\n    run: \"true\"\n"), 0o644)
	if r := poolrun(t, work, "run", "--quiet", "ok.yaml"); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if got, err := os.ReadFile(data); err != nil || string(got) != "x\n" {
		t.Errorf("the user's %s after poolrun run: %q, %v", data, got, err)
	}
}
