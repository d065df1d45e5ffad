package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/proctest"
)

// The janitor of a killed poolrun run kills what that run started, and
// nothing else (issue 21): not what an earlier run with the same pid left,
// and all of what a nested run started.

// lastPID is the file that sets the pid the next new process of this pid
// namespace gets: the one it holds, plus one.
const lastPID = "/proc/sys/kernel/ns_last_pid"

// procsWithEnv returns the live processes whose environment holds entry.
func procsWithEnv(entry string) []int {
	return proctest.Find("environ", func(env []byte) bool {
		return slices.Contains(strings.Split(string(env), "\x00"), entry)
	})
}

// janitorOf returns the janitor of the poolrun whose pid is pid: its child
// with execflow.JanitorEnv in its environment.
func janitorOf(t *testing.T, pid int) int {
	t.Helper()
	for _, c := range proctest.Children(pid) {
		if slices.ContainsFunc(proctest.Environ(c), func(e string) bool { return strings.HasPrefix(e, execflow.JanitorEnv+"=") }) {
			return c
		}
	}
	t.Fatalf("poolrun %d has no janitor among its children %v", pid, proctest.Children(pid))
	return 0
}

// startAsPID starts poolrun in dir with args as process pid, which must be
// free, by setting the pid namespace's last pid just before: whatever
// process the host starts in between takes the pid instead, and the start
// is tried again a few times. It returns nil if pid could not be had.
func startAsPID(t *testing.T, pid int, dir string, args ...string) *exec.Cmd {
	t.Helper()
	for range 20 {
		if proctest.Alive(pid) {
			return nil // taken, for who knows how long
		}
		cmd := exec.Command(poolrunBin, args...)
		cmd.Dir = dir
		if err := os.WriteFile(lastPID, []byte(strconv.Itoa(pid-1)), 0); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if cmd.Process.Pid == pid {
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			return cmd
		}
		cmd.Process.Kill()
		cmd.Wait()
	}
	return nil
}

// TestJanitorSparesEarlierRun forces the pid of a finished run on a new
// run (through ns_last_pid). The finished run left a daemon, a sleep in a
// session of its own whose mark names that pid (the daemon took its
// command's number off the mark, so that the run's end spared it); the
// new run, killed with SIGKILL, has its janitor kill its own command's
// daemon, but not the earlier run's: the mark names a process by its
// start time too.
func TestJanitorSparesEarlierRun(t *testing.T) {
	t.Parallel()
	if f, err := os.OpenFile(lastPID, os.O_WRONLY, 0); err != nil {
		t.Skipf("cannot choose the pid of a new process: %v", err)
	} else {
		f.Close()
	}
	dir := t.TempDir()
	earlier, own := uniqueArg(300), uniqueArg(300)
	killAll(t, "sleep", earlier)
	killAll(t, "sleep", own)
	// The earlier run's command waits until its daemon is in a session of
	// its own, and bears the run's mark without the command's number: the
	// end of the command kills its process group, and what bears its
	// number.
	os.WriteFile(filepath.Join(dir, "earlier.yaml"), []byte(fmt.Sprintf(`jobs:
  - id: daemon
    run: |
      own=$(echo "$POOLRUN_OWNER" | sed 's/:[0-9]*$//')
      setsid env POOLRUN_OWNER="$own" sh -c 'touch started; exec sleep %s' </dev/null >/dev/null 2>&1 &
      i=0
      while [ ! -e started ]; do
        i=$((i+1)); [ $i -lt 3000 ] || { echo "the daemon did not start" >&2; exit 1; }
        sleep 0.01
      done
`, earlier)), 0o644)
	os.WriteFile(filepath.Join(dir, "own.yaml"), []byte(fmt.Sprintf("jobs:\n  - id: daemon\n    run: setsid sleep %s </dev/null >/dev/null 2>&1 & wait\n", own)), 0o644)

	var cmd *exec.Cmd
	var daemon int // the earlier run's
	for range 5 {
		os.Remove(filepath.Join(dir, "started"))
		first := exec.Command(poolrunBin, "run", "--quiet", "earlier.yaml")
		first.Dir = dir
		if out, err := first.CombinedOutput(); err != nil {
			t.Fatalf("the earlier run: %v\n%s", err, out)
		}
		// The daemon's shell touches started before it becomes sleep.
		pids := waitProcs(t, "sleep", earlier)
		if len(pids) != 1 {
			t.Fatalf("the earlier run left daemons %v, want one", pids)
		}
		daemon = pids[0]
		if cmd = startAsPID(t, first.Process.Pid, dir, "run", "--quiet", "own.yaml"); cmd != nil {
			break
		}
		syscall.Kill(daemon, syscall.SIGKILL)
		proctest.WaitGone([]int{daemon}, 10*time.Second)
	}
	if cmd == nil {
		t.Skip("no run got the pid of an earlier one: other processes took it first")
	}
	ownDaemon := waitProcs(t, "sleep", own)[0]
	janitor := janitorOf(t, cmd.Process.Pid)
	// The daemon's end is watched on a pidfd: it is no child of this
	// process.
	fd, err := unix.PidfdOpen(daemon, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if gone := proctest.WaitGone([]int{ownDaemon, janitor}, 30*time.Second); len(gone) > 0 {
		t.Fatalf("30 s after the run with pid %d was killed, its command's daemon %d and its janitor %d: %v still there", cmd.Process.Pid, ownDaemon, janitor, gone)
	}
	// The janitor sent its last signal before it exited: a daemon it
	// killed exits within moments.
	if exited(t, fd, 2*time.Second) {
		t.Errorf("the daemon %d of the earlier run with pid %d ended when the janitor of the later run with that pid did its work", daemon, cmd.Process.Pid)
	}
}

// exited waits up to limit for the process of pidfd fd to exit, and
// reports whether it did.
func exited(t *testing.T, fd int, limit time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ms := int(time.Until(deadline).Milliseconds())
		if ms <= 0 {
			return false
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, ms)
		switch {
		case err == unix.EINTR: // the runtime's preemption signal
		case err != nil:
			t.Fatal(err)
		default:
			return n > 0
		}
	}
}

// TestJanitorEndsNestedRun kills with SIGKILL an outer run whose command
// is itself a poolrun run, whose command leaves a daemon (a sleep in a
// session of its own): the outer run's janitor finds the inner run's
// processes by their mark, which holds the outer run's pair, and no
// process of the inner run (each bears a variable of this test's) is left
// once the inner run's own janitor has done its work. The inner poolrun
// is the outer command, which the outer poolrun's death kills at once
// (its parent-death signal), or a child of the outer command's shell,
// which the outer janitor alone kills.
func TestJanitorEndsNestedRun(t *testing.T) {
	for _, c := range []struct{ name, command string }{
		{"direct", "env %s %s run --quiet inner.yaml"},
		{"shell", "env %s %s run --quiet inner.yaml; echo the inner run ended"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			arg := uniqueArg(300)
			killAll(t, "sleep", arg)
			mark := "JANITOR_TEST_INNER=" + arg
			t.Cleanup(func() {
				for _, pid := range procsWithEnv(mark) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			os.WriteFile(filepath.Join(dir, "outer.yaml"), []byte("jobs:\n  - id: nested\n    run: "+fmt.Sprintf(c.command, mark, poolrunBin)+"\n"), 0o644)
			os.WriteFile(filepath.Join(dir, "inner.yaml"), []byte(fmt.Sprintf("jobs:\n  - id: daemon\n    run: setsid sleep %s </dev/null >/dev/null 2>&1 & wait\n", arg)), 0o644)
			cmd, out := startPoolrun(t, dir, nil, "run", "--quiet", "outer.yaml")
			daemon := waitProcs(t, "sleep", arg)
			inner := procsWithArgs(poolrunBin, "run", "--quiet", "inner.yaml")
			if len(inner) != 1 {
				t.Fatalf("inner runs %v, want one", inner)
			}
			janitor := janitorOf(t, inner[0])
			if procs := procsWithEnv(mark); !slices.Contains(procs, daemon[0]) || !slices.Contains(procs, janitor) {
				t.Fatalf("processes with %s: %v, not the inner run's daemon %d and janitor %d: the test proves nothing", mark, procs, daemon[0], janitor)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			deadline := time.Now().Add(30 * time.Second)
			for {
				left := procsWithEnv(mark)
				if len(left) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("30 s after the outer run was killed, processes of the inner run %d are left: %v (its daemon %v, its janitor %d); the outer run said:\n%s", inner[0], left, daemon, janitor, out)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
