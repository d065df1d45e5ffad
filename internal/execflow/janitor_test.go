package execflow_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/proctest"
	"github.com/poolrun/poolrun/internal/spawn"
	"github.com/poolrun/poolrun/internal/workflow"
)

// janitoredFlow is what roleJanitored runs: a job that needs an item (so
// that the pool's process has a scratch folder) and whose shell has a
// child, which writes its pid, that the shell's parent-death signal does
// not reach.
const janitoredFlow = `
items:
  ref:
    run: echo data > "$POOLRUN_ITEM"
jobs:
  - id: sleeper
    needs: [ref]
    run: |
      sh -c 'echo $$ > "$LOG/grandchild.tmp"; mv "$LOG/grandchild.tmp" "$LOG/grandchild"; exec sleep 30' &
      sleep 30
      wait
`

// roleJanitored runs janitoredFlow as poolrun run does, on two in-process
// workers with a janitor, and waits to be killed; with
// EXECFLOW_TEST_DISMISS it dismisses the janitor once the grandchild has
// written its pid, and then waits to be killed.
func roleJanitored() int {
	wf, err := workflow.Parse("janitored.yaml", []byte(janitoredFlow))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	opts := execflow.Options{
		Scratch: os.Getenv("EXECFLOW_TEST_SCRATCH"),
		Env:     []string{"LOG=" + os.Getenv("EXECFLOW_TEST_LOG")},
	}
	j, err := execflow.StartJanitor(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Fprintln(os.Stderr, "janitor", j.Pid())
	// The test reads it here: a dismissed janitor may be gone before the
	// test looks among this process's children.
	if err := os.WriteFile(filepath.Join(os.Getenv("EXECFLOW_TEST_LOG"), "janitor"), []byte(fmt.Sprintln(j.Pid())), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	p := engine.New(engine.InProcess(2))
	if _, err := execflow.Queue(p, wf, opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if os.Getenv("EXECFLOW_TEST_DISMISS") != "" {
		go func() {
			readPID(context.Background(), filepath.Join(os.Getenv("EXECFLOW_TEST_LOG"), "grandchild"))
			j.Close()
		}()
	}
	p.Run(context.Background())
	return 1
}

// startJanitored starts roleJanitored and waits for the command's
// grandchild; it returns the process, the grandchild's pid and the
// janitor's.
func startJanitored(t *testing.T, logDir, root string, env ...string) (*exec.Cmd, int, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return startJanitoredFrom(t, exe, logDir, root, env...)
}

// startJanitoredFrom is startJanitored with the program at exe.
func startJanitoredFrom(t *testing.T, exe, logDir, root string, env ...string) (*exec.Cmd, int, int) {
	t.Helper()
	cmd := exec.Command(exe)
	cmd.Env = append(append(os.Environ(), envRole+"=janitored", "EXECFLOW_TEST_LOG="+logDir, "EXECFLOW_TEST_SCRATCH="+root), env...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = os.Stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	grandchild, err := readPID(context.Background(), filepath.Join(logDir, "grandchild"))
	if err != nil {
		t.Fatal(err)
	}
	janitor, err := readPID(context.Background(), filepath.Join(logDir, "janitor"))
	if err != nil {
		t.Fatal(err)
	}
	// The janitor is this process's child, with the janitor's variable,
	// unless it was dismissed already.
	if slices.Contains(proctest.Children(cmd.Process.Pid), janitor) {
		// (It may be gone by now, dismissed: nothing to read then.)
		if env := proctest.Environ(janitor); len(env) > 0 && !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, execflow.JanitorEnv+"=") }) {
			t.Fatalf("process %d, which %d said is its janitor, has no %s; it said:\n%s", janitor, cmd.Process.Pid, execflow.JanitorEnv, stderr.String())
		}
	} else if !strings.Contains(strings.Join(cmd.Env, "\n"), "EXECFLOW_TEST_DISMISS=") {
		t.Fatalf("janitor %d is not a child of %d", janitor, cmd.Process.Pid)
	}
	return cmd, grandchild, janitor
}

// TestJanitor kills, with SIGKILL, a process that runs a pool's commands
// in its own goroutines (engine.InProcess) with a janitor: the janitor
// kills the command's grandchild (which the shell's parent-death signal
// does not reach), removes the process's scratch folder, and exits.
func TestJanitor(t *testing.T) {
	logDir, root := t.TempDir(), t.TempDir()
	cmd, grandchild, janitor := startJanitored(t, logDir, root)
	if left := scratchLeft(t, root); len(left) != 1 {
		t.Fatalf("while the job runs, the scratch root holds %q, want one folder", left)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	killed := time.Now()
	deadline := killed.Add(10 * time.Second)
	for proctest.Alive(grandchild) || proctest.Alive(janitor) || len(scratchLeft(t, root)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the pool's process was killed: grandchild %d alive: %v; janitor %d alive: %v; scratch root holds %q",
				grandchild, proctest.Alive(grandchild), janitor, proctest.Alive(janitor), scratchLeft(t, root))
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("the grandchild, the scratch folder and the janitor were gone %v after the pool's process", time.Since(killed).Round(time.Millisecond))
}

// TestJanitorProgramGone: the janitor does its work when the program is
// no longer where it was started from (go run removes its build when the
// pool's process dies): its waiting shell holds the program open.
func TestJanitorProgramGone(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	prog := filepath.Join(dir, "pool")
	if err := os.WriteFile(prog, data, 0o755); err != nil {
		t.Fatal(err)
	}
	logDir, root := t.TempDir(), t.TempDir()
	cmd, grandchild, janitor := startJanitoredFrom(t, prog, logDir, root)
	if err := os.Remove(prog); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if left := proctest.WaitGone([]int{grandchild, janitor}, 10*time.Second); len(left) > 0 {
		t.Fatalf("10 s after the pool's process was killed, with its program removed: %v still there (grandchild %d, janitor %d)", left, grandchild, janitor)
	}
	if left := scratchLeft(t, root); len(left) > 0 {
		t.Errorf("the scratch root holds %q, want nothing", left)
	}
}

// TestJanitorDismissed: a janitor that the pool's process dismisses
// (Janitor.Close) exits at once and touches nothing: the command's
// grandchild runs on, and the scratch folder stays while its item is held.
func TestJanitorDismissed(t *testing.T) {
	logDir, root := t.TempDir(), t.TempDir()
	_, grandchild, janitor := startJanitored(t, logDir, root, "EXECFLOW_TEST_DISMISS=1")
	if left := proctest.WaitGone([]int{janitor}, 10*time.Second); len(left) > 0 {
		t.Fatalf("the dismissed janitor %d is still there", janitor)
	}
	if !proctest.Alive(grandchild) {
		t.Error("the dismissed janitor killed the command's grandchild")
	}
	if left := scratchLeft(t, root); len(left) != 1 {
		t.Errorf("after the janitor's dismissal, the scratch root holds %q, want one folder", left)
	}
	syscall.Kill(grandchild, syscall.SIGKILL)
}

// TestJanitorOfInnerRun plays the janitor of an outer run whose command
// started a pool's process (which bears the outer run's mark, as a nested
// poolrun run does): the outer janitor kills every process whose mark
// begins with its pair, in rounds. That ends the pool's process and its
// command's grandchild, whose mark holds the outer pair before its own
// pool's, but not the pool's janitor, which then kills what is left of its
// pool's, removes the pool's scratch folder, and exits.
func TestJanitorOfInnerRun(t *testing.T) {
	outer := fmt.Sprintf("%d.%d", os.Getpid(), time.Now().UnixNano()) // no process's tag
	mark := execflow.OwnerEnv + "=" + outer + ":" + outer
	logDir, root := t.TempDir(), t.TempDir()
	cmd, grandchild, janitor := startJanitored(t, logDir, root, mark)
	if left := scratchLeft(t, root); len(left) != 1 {
		t.Fatalf("while the job runs, the scratch root holds %q, want one folder", left)
	}
	outerJanitor := func(entry string) bool { return strings.HasPrefix(entry, mark) }
	for range 10 {
		if spawn.SignalTagged(outerJanitor, syscall.SIGKILL) == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for proctest.Alive(grandchild) || proctest.Alive(janitor) || len(scratchLeft(t, root)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the outer janitor's kill: grandchild %d alive: %v; janitor %d alive: %v; scratch root holds %q",
				grandchild, proctest.Alive(grandchild), janitor, proctest.Alive(janitor), scratchLeft(t, root))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestJanitorByHand: a janitor started by hand (its standard input not a
// pipe) refuses, with exit status 2 and a message that says why.
func TestJanitorByHand(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d.1:%s", execflow.JanitorEnv, os.Getpid(), t.TempDir()))
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), "not to be started by hand") {
		t.Errorf("exit %d (%v), want 2 and why:\n%s", code, err, out)
	}
}
