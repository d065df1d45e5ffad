//go:build linux

package execflow

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/proctest"
)

// TestRunShell runs commands: the status, the output in the log files,
// the tail of standard error, a command stopped by its context, and one
// whose orphan keeps its output open past drainGrace.
func TestRunShell(t *testing.T) {
	dir := t.TempDir()
	run := func(ctx context.Context, job, run string) (shellOutcome, error) {
		return runShell(ctx, shellCmd{run: run, dir: dir, env: os.Environ(), tailLines: 2, job: job, stdio: Stdio{LogDir: dir}})
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	out, err := run(context.Background(), "status", "echo out; echo one >&2; echo two >&2; echo three >&2; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	if out.exitCode != 3 || out.signal != "" || out.tail != "two\nthree" {
		t.Errorf("exit %d, signal %q, tail %q; want 3, none, \"two\\nthree\"", out.exitCode, out.signal, out.tail)
	}
	if got := read("status.out"); got != "out\n" {
		t.Errorf("status.out holds %q", got)
	}
	if got := read("status.err"); got != "one\ntwo\nthree\n" {
		t.Errorf("status.err holds %q", got)
	}

	out, err = run(context.Background(), "plain", "true")
	if err != nil || out.exitCode != 0 {
		t.Errorf("true: exit %d, %v", out.exitCode, err)
	}
	out, err = run(context.Background(), "killed", "kill -9 $$")
	if err != nil || out.signal != "SIGKILL" {
		t.Errorf("kill -9 $$: signal %q, %v", out.signal, err)
	}

	// Stopped by its context; a shell that ignores SIGTERM is
	// killed killGrace later.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = run(ctx, "stopped", "trap '' TERM; sleep 30 & sleep 30")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a command past its context: %v, want one that wraps the deadline", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("stopping it took %v", d)
	}

	// An orphan out of the group holds the pipes: what was
	// written before drainGrace passes on, and the wait ends
	// long before the orphan does.
	start = time.Now()
	out, err = run(context.Background(), "orphan", "echo before; setsid sh -c 'echo $$ > orphan.tmp; mv orphan.tmp orphan.pid; exec sleep 120' & i=0; until [ -e orphan.pid ] || [ $i -ge 3000 ]; do sleep 0.01; i=$((i+1)); done; exit 0")
	if err != nil || out.exitCode != 0 {
		t.Errorf("orphan: exit %d, %v", out.exitCode, err)
	}
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("the orphan held the command for %v", d)
	}
	killOrphan(t, filepath.Join(dir, "orphan.pid"))
	if got := read("orphan.out"); got != "before\n" {
		t.Errorf("orphan.out holds %q", got)
	}
}

// TestRunShellLeavesNothingOpen: after commands, the process has the
// descriptors it had.
func TestRunShellLeavesNothingOpen(t *testing.T) {
	fds := func() []string {
		open, err := proctest.FDs()
		if err != nil {
			t.Skip("no /proc/self/fd:", err)
		}
		var targets []string
		for _, l := range open {
			if !strings.Contains(l, "eventpoll") {
				targets = append(targets, l)
			}
		}
		slices.Sort(targets)
		return targets
	}
	// /dev/null is opened once, for every command's standard input.
	if _, err := devNull(); err != nil {
		t.Fatal(err)
	}
	before := fds()
	for range 20 {
		if _, err := runShell(context.Background(), shellCmd{run: "true", dir: t.TempDir(), env: os.Environ(), tailLines: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if after := fds(); !slices.Equal(before, after) {
		t.Errorf("descriptors before: %v\nafter: %v", before, after)
	}
}

// killOrphan kills the process whose pid the file at path holds, once
// written (within a deadline).
func killOrphan(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("the orphan did not write %s", path)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
