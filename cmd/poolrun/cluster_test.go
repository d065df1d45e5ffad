package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/proctest"
)

// TestClusterChecksum is issue 12's command line: a scaffold whose pool
// starts no worker of its own (-j 0 with --listen) and three workers that
// join through its join file (poolrun worker -j 3) give the checksum of
// poolrun -j 2; the three ran every job between them; the join file is
// gone at the end.
func TestClusterChecksum(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	local := poolrun(t, dir, "scaffold", "--scale", tinyScale, "-j", "2", "--out", "a", "--quiet")
	want := line(local.stdout, "checksum:")
	if local.code != 0 || want == "" {
		t.Fatalf("poolrun -j 2: exit %d\n%s%s", local.code, local.stdout, local.stderr)
	}
	pool, out := startPoolrun(t, dir, nil, "scaffold", "--scale", tinyScale, "-j", "0", "--out", "b",
		"--listen", "127.0.0.1:0", "--join-file", "run.join", "--report", "r.json")
	joinFile := filepath.Join(dir, "run.join")
	waitJoinFile(t, joinFile, out)
	if w := poolrun(t, dir, "worker", "--join-file", "run.join", "-j", "3"); w.code != 0 {
		t.Errorf("poolrun worker: exit %d\n%s%s", w.code, w.stdout, w.stderr)
	}
	if err := pool.Wait(); err != nil {
		t.Fatalf("the pool: %v\n%s", err, out)
	}
	if got := line(out.String(), "checksum:"); got != want {
		t.Errorf("checksum %q with three joined workers, %q with -j 2\n%s", got, want, out)
	}
	data, err := os.ReadFile(filepath.Join(dir, "r.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Jobs    []json.RawMessage `json:"jobs"`
		Workers []struct {
			Jobs int `json:"jobs"`
		} `json:"workers"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, w := range rep.Workers {
		total += w.Jobs
	}
	if len(rep.Workers) != 3 || total != len(rep.Jobs) {
		t.Errorf("%d workers ran %d of %d jobs; want 3 that ran them all", len(rep.Workers), total, len(rep.Jobs))
	}
	if _, err := os.Stat(joinFile); !os.IsNotExist(err) {
		t.Errorf("the join file is still there: %v", err)
	}
}

// TestClusterNoWorker: a pool with no local worker that no worker joins
// fails after --join-timeout, with exit status 1 and a message that says
// how to start a worker.
func TestClusterNoWorker(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte("jobs:\n  - id: a\n    run: touch ran-a\n"), 0o644)
	start := time.Now()
	r := poolrun(t, dir, "run", "-j", "0", "--listen", "127.0.0.1:0", "--join-file", "run.join", "--join-timeout", "1s", "wf.yaml")
	if r.code != 1 || !strings.Contains(r.stderr, "poolrun worker --join-file run.join") {
		t.Errorf("exit %d, want 1 and how to start a worker\n%s", r.code, r.stderr)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("it took %v to give up", d)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran-a")); err == nil {
		t.Error("the job ran")
	}
}

// TestWorkerKilled: poolrun worker -j 2 (a host agent) killed with
// SIGKILL while its workers run commands: its worker processes and their
// commands end within a second or so (the bound here is generous for a
// loaded machine; the time is logged), and the pool Aborts the job (no
// --retries) rather than waiting for the silence limit.
func TestWorkerKilled(t *testing.T) {
	dir := t.TempDir()
	arg := uniqueArg(60)
	killAll(t, "sleep", arg)
	wf := fmt.Sprintf("jobs:\n  - id: long\n    run: sleep %s; echo hi\n  - id: other\n    run: sleep %s; echo hi\n", arg, arg)
	os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(wf), 0o644)
	pool, out := startPoolrun(t, dir, nil, "run", "-j", "0", "--listen", "127.0.0.1:0", "--join-file", "run.join", "wf.yaml")
	joinFile := filepath.Join(dir, "run.join")
	waitJoinFile(t, joinFile, out)
	agent, _ := startPoolrun(t, dir, nil, "worker", "--join-file", "run.join", "-j", "2")
	var sleeps []int
	for deadline := time.Now().Add(60 * time.Second); len(sleeps) < 2; time.Sleep(20 * time.Millisecond) {
		sleeps = procsWithArgs("sleep", arg)
		if time.Now().After(deadline) {
			t.Fatalf("%d of the 2 commands run after a minute:\n%s", len(sleeps), out)
		}
	}
	workers := proctest.Children(agent.Process.Pid)
	if len(workers) != 2 {
		t.Fatalf("the agent has %d children, want its 2 workers", len(workers))
	}
	agent.Process.Kill()
	killed := time.Now()
	all := append(slices.Clone(workers), sleeps...)
	for deadline := killed.Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		left := slices.DeleteFunc(slices.Clone(all), func(pid int) bool { return !proctest.Alive(pid) })
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v of the killed agent's workers (%v) and commands (%v) are still there 10 s after its kill", left, workers, sleeps)
		}
	}
	gone := time.Since(killed)
	t.Logf("the killed agent's workers and their commands were gone %v after its kill", gone.Round(time.Millisecond))
	if gone > 3*time.Second {
		t.Errorf("the killed agent's workers and commands took %v to end, want about a second", gone.Round(time.Millisecond))
	}
	err := pool.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out.String(), "aborted") {
		t.Errorf("the pool: %v, want exit status 1 with the jobs aborted:\n%s", err, out)
	}
	if d := time.Since(killed); d > 8*time.Second {
		t.Errorf("the pool ended %v after the agent's kill: it waited for the silence limit, not the connection's end", d.Round(time.Millisecond))
	}
}

// TestPoolStoppedFencesCommands: while a pool is stopped (SIGSTOP, as
// Ctrl-Z) long enough that its agent hears nothing, the agent stops the
// commands its workers run, and continues them when the pool is
// continued: the run then completes.
func TestPoolStoppedFencesCommands(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("stops a pool for 8 s")
	}
	dir := t.TempDir()
	arg := uniqueArg(10) // longer than the agent takes to stop it
	killAll(t, "sleep", arg)
	pool, out, agent, agentOut := startListenRun(t, dir, "sleep "+arg)
	sleeps := waitProcs(t, "sleep", arg)
	pool.Process.Signal(syscall.SIGSTOP)
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(agentOut.String(), "stopped until it speaks"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			pool.Process.Signal(syscall.SIGCONT)
			t.Fatalf("the agent did not stop its workers 30 s after the pool stopped:\n%s", agentOut.String())
		}
	}
	for _, pid := range sleeps {
		if st := proctest.State(pid); st != "T" {
			t.Errorf("the command %d is in state %q while the pool is stopped, want T", pid, st)
		}
	}
	pool.Process.Signal(syscall.SIGCONT)
	if err := pool.Wait(); err != nil {
		t.Errorf("the pool, continued: %v\n%s", err, out)
	}
	if err := agent.Wait(); err != nil {
		t.Errorf("the agent: %v\n%s", err, agentOut.String())
	}
}

// startListenRun starts, in dir, poolrun run of a workflow of one job
// that runs run, with no local worker and --listen, and one poolrun
// worker -j 1 that joins it; what the worker prints is read while it
// runs.
func startListenRun(t *testing.T, dir, run string) (pool *exec.Cmd, out *bytes.Buffer, agent *exec.Cmd, agentOut *proctest.Buffer) {
	t.Helper()
	os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte("jobs:\n  - id: long\n    run: "+run+"\n"), 0o644)
	pool, out = startPoolrun(t, dir, nil, "run", "-j", "0", "--listen", "127.0.0.1:0", "--join-file", "run.join", "wf.yaml")
	waitJoinFile(t, filepath.Join(dir, "run.join"), out)
	agent, agentOut = startAgent(t, dir, "1")
	return pool, out, agent, agentOut
}

// startAgent starts, in dir, poolrun worker -j workers on run.join; what
// it prints is kept in out. The test's end kills it if it still runs.
func startAgent(t *testing.T, dir, workers string) (agent *exec.Cmd, out *proctest.Buffer) {
	t.Helper()
	agent = exec.Command(poolrunBin, "worker", "--join-file", "run.join", "-j", workers)
	agent.Dir = dir
	out = new(proctest.Buffer)
	agent.Stdout, agent.Stderr = out, out
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if agent.ProcessState == nil {
			agent.Process.Kill()
			agent.Wait()
		}
	})
	return agent, out
}

// TestWorkerPoolKilled: poolrun worker whose pool is killed (SIGKILL)
// while its worker runs a command kills the command, and exits with
// status 1 saying that it lost the pool: a pool killed is not a pool
// that ended.
func TestWorkerPoolKilled(t *testing.T) {
	dir := t.TempDir()
	arg := uniqueArg(60)
	killAll(t, "sleep", arg)
	pool, _, agent, agentOut := startListenRun(t, dir, "sleep "+arg+"; echo hi")
	sleeps := waitProcs(t, "sleep", arg)
	pool.Process.Kill()
	done := make(chan error, 1)
	go func() { done <- agent.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(agentOut.String(), "lost the pool") {
			t.Errorf("poolrun worker, its pool killed: %v, want exit status 1 saying that it lost the pool:\n%s", err, agentOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("poolrun worker is still there 20 s after its pool was killed:\n%s", agentOut.String())
	}
	t.Logf("poolrun worker said:\n%s", agentOut.String())
	if left := proctest.WaitGone(sleeps, 10*time.Second); len(left) > 0 {
		t.Errorf("the command %v is still there after its worker's pool was killed", left)
	}
}

// TestListenNeedsHub: poolrun run --listen without poolrun-hub beside it or
// on PATH (a copy of poolrun alone in a folder) exits 2 with a message that
// says how to install it and how to name it, before any job runs, and
// leaves no join file; with $POOLRUN_HUB naming the real one, the same run
// serves.
func TestListenNeedsHub(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	alone := filepath.Join(t.TempDir(), "poolrun")
	data, err := os.ReadFile(poolrunBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, data, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte("jobs:\n  - id: made\n    run: touch made\n"), 0o644)
	args := []string{"run", "-j", "1", "--listen", "127.0.0.1:0", "--join-file", "run.join", "wf.yaml"}
	cmd := exec.Command(alone, args...)
	cmd.Dir = dir
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "POOLRUN_HUB=")
	}), "PATH=/usr/bin:/bin")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want 2\n%s", err, out)
	}
	for _, want := range []string{"--listen needs poolrun-hub", "go install github.com/poolrun/poolrun/cmd/poolrun-hub@latest", "$POOLRUN_HUB"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the message does not say %q:\n%s", want, out)
		}
	}
	for _, name := range []string{"made", "run.join"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s exists after the refusal", name)
		}
	}
	cmd = exec.Command(alone, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "POOLRUN_HUB="+filepath.Join(filepath.Dir(poolrunBin), "poolrun-hub"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("with $POOLRUN_HUB: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "made")); err != nil {
		t.Errorf("with $POOLRUN_HUB: %v", err)
	}
}

// TestListenKilledLeavesNoHub: a pool with --listen killed with SIGKILL
// leaves no poolrun-hub running: the server ends at the end of its input,
// which the pool alone held.
func TestListenKilledLeavesNoHub(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte("jobs:\n  - id: long\n    run: sleep 60\n"), 0o644)
	pool, out := startPoolrun(t, dir, nil, "run", "-j", "1", "--listen", "127.0.0.1:0", "--join-file", "run.join", "wf.yaml")
	waitJoinFile(t, filepath.Join(dir, "run.join"), out)
	hubs := proctest.Find("cmdline", func(data []byte) bool {
		return string(data) == filepath.Join(filepath.Dir(poolrunBin), "poolrun-hub")+"\x00"
	})
	var mine []int
	for _, pid := range hubs {
		if proctest.ParentOf(pid) == pool.Process.Pid {
			mine = append(mine, pid)
		}
	}
	if len(mine) != 1 {
		t.Fatalf("poolrun-hub processes of the pool: %v, want one\n%s", mine, out)
	}
	pool.Process.Kill()
	pool.Wait()
	if left := proctest.WaitGone(mine, 30*time.Second); len(left) > 0 {
		t.Errorf("poolrun-hub %v still runs 30 s after its pool was killed", left)
	}
}
