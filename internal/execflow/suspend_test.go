package execflow_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/proctest"
)

// TestSuspend stops the work of a running pool with execflow.Suspend, in
// worker processes and serially: the command and its child are stopped
// (state T) and make no progress; once resumed, they run on and the job
// succeeds. The child is in a session of its own and the pool is nested
// in an outer run (its own mark comes after the outer run's): only its
// pair in the child's mark finds it.
func TestSuspend(t *testing.T) {
	t.Setenv(execflow.OwnerEnv, "1.100:2.200")
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			logDir := t.TempDir()
			// The command's child counts while it runs: once stopped, the
			// count stays.
			wf := parse(t, "suspend.yaml", `
jobs:
  - id: long
    run: |
      setsid sh -c 'echo $$ > "$LOG/child.tmp"; mv "$LOG/child.tmp" "$LOG/child"; while [ ! -e "$LOG/go" ]; do echo tick >> "$LOG/ticks"; sleep 0.01; done' &
      echo $$ > "$LOG/shell.tmp"; mv "$LOG/shell.tmp" "$LOG/shell"
      wait
`)
			p := engine.New(engine.Workers(m.workers))
			jobs, err := execflow.Queue(p, wf, execflow.Options{Env: []string{"LOG=" + logDir}, Scratch: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			defer func() { os.WriteFile(filepath.Join(logDir, "go"), nil, 0o600) }()

			shell, err := readPID(ctx, filepath.Join(logDir, "shell"))
			if err != nil {
				t.Fatal(err)
			}
			child, err := readPID(ctx, filepath.Join(logDir, "child"))
			if err != nil {
				t.Fatal(err)
			}
			tickBy := time.Now().Add(time.Minute)
			for ticks(t, logDir) == 0 {
				if time.Now().After(tickBy) {
					t.Fatal("the command's child did not tick within a minute")
				}
				time.Sleep(10 * time.Millisecond)
			}
			resume := execflow.Suspend(p)
			defer resume()
			for _, pid := range []int{shell, child} {
				if !waitStopped(pid) {
					t.Errorf("process %d is in state %q, not stopped (T)", pid, proctest.State(pid))
				}
			}
			before := ticks(t, logDir)
			time.Sleep(200 * time.Millisecond)
			if after := ticks(t, logDir); after != before {
				t.Errorf("the stopped command went on: %d ticks, then %d", before, after)
			}
			resume()
			for _, pid := range []int{shell, child} {
				if !waitState(pid, func(s string) bool { return s != "T" }) {
					t.Errorf("process %d is in state %q after resume", pid, proctest.State(pid))
				}
			}
			deadline := time.Now().Add(10 * time.Second)
			for ticks(t, logDir) == before {
				if time.Now().After(deadline) {
					t.Fatal("the command made no progress after resume")
				}
				time.Sleep(10 * time.Millisecond)
			}
			os.WriteFile(filepath.Join(logDir, "go"), nil, 0o600)
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
			if _, err := jobs["long"].Result(); err != nil {
				t.Error(err)
			}
		})
	}
}

// ticks counts the lines of LOG/ticks.
func ticks(t *testing.T, logDir string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(logDir, "ticks"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Count(string(data), "\n")
}

// waitState waits, for a generous while, until the state of process pid
// is one that ok accepts.
// waitStopped waits up to 10 s for process pid to be stopped: in state T,
// or in D with a child in T. The shell starts its commands with vfork, and
// a process that waits in vfork for a child that was stopped before its
// exec stays in D (uninterruptible) until the child goes on: it is
// stopped all the same.
func waitStopped(pid int) bool {
	return waitState(pid, func(s string) bool {
		if s == "T" {
			return true
		}
		if s == "D" {
			for _, c := range proctest.Children(pid) {
				if proctest.State(c) == "T" {
					return true
				}
			}
		}
		return false
	})
}

func waitState(pid int, ok func(state string) bool) bool {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ok(proctest.State(pid)) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}
