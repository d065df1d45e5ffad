package execflow_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/proctest"
	"github.com/poolrun/poolrun/internal/workflow"
)

// parentFlow is what roleParent runs: a job that sleeps, with a child of its
// own, and needs an item, so that its worker has a scratch folder.
const parentFlow = `
items:
  ref:
    run: echo data > "$POOLRUN_ITEM"
jobs:
  - id: sleeper
    needs: [ref]
    run: |
      echo $PPID > "$LOG/worker"
      echo $$ > "$LOG/pgid"
      sleep 30 & sleep 30
      wait
`

// roleParent runs parentFlow with one worker, with the log folder and the
// scratch root given in the environment, and waits to be killed.
func roleParent() int {
	wf, err := workflow.Parse("parent.yaml", []byte(parentFlow))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	p := engine.New(engine.Workers(1))
	_, err = execflow.Queue(p, wf, execflow.Options{
		Scratch: os.Getenv("EXECFLOW_TEST_SCRATCH"),
		Env:     []string{"LOG=" + os.Getenv("EXECFLOW_TEST_LOG")},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	p.Run(context.Background())
	return 1
}

// TestParentKilled kills the process that runs a pool with SIGKILL while a
// command runs: the command's process group and the worker must go, and
// the worker must remove its scratch folder (all within a generous wait).
func TestParentKilled(t *testing.T) {
	logDir, root := t.TempDir(), t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envRole+"=parent", "EXECFLOW_TEST_LOG="+logDir, "EXECFLOW_TEST_SCRATCH="+root)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	pgid, err := readPID(context.Background(), filepath.Join(logDir, "pgid"))
	if err != nil {
		t.Fatal(err)
	}
	worker, err := readPID(context.Background(), filepath.Join(logDir, "worker"))
	if err != nil {
		t.Fatal(err)
	}
	if left := scratchLeft(t, root); len(left) != 1 {
		t.Errorf("while the job runs, the scratch root holds %q, want one folder", left)
	}
	killed := time.Now()
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	waitGroupGone(t, pgid)
	deadline := time.Now().Add(10 * time.Second)
	for proctest.Alive(worker) || len(scratchLeft(t, root)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the parent was killed: worker %d alive: %v; scratch root holds %q",
				worker, proctest.Alive(worker), scratchLeft(t, root))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the worker and the command were gone %v after the parent", time.Since(killed).Round(10*time.Millisecond))
}
