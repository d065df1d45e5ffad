//go:build linux

package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/internal/execflow"
)

// TestRunTimerSlack: a run with many commands to run re-executes itself
// (same pid) with execflow.TimerSlack as its timer slack, and gives its
// commands the slack it was started with, without its marker in their
// environment; a run with few keeps its slack. Where this process may not
// read another's slack (CAP_SYS_NICE), poolrun's is not checked.
func TestRunTimerSlack(t *testing.T) {
	readSlack := func(path string) (int64, bool) {
		b, err := os.ReadFile(path)
		if err != nil || len(strings.TrimSpace(string(b))) == 0 {
			return 0, false
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n, err == nil
	}
	own, ok := readSlack("/proc/self/timerslack_ns")
	if !ok {
		t.Skip("no /proc/self/timerslack_ns here")
	}
	ownPolicy := policyOf(t, "/proc/self/stat")
	for _, c := range []struct {
		name string
		jobs int
		want int64 // poolrun's slack
		// again: run twice, and look at the second run, which finds the
		// state file of the first (poolrun run decides after it has read
		// the workflow and the state).
		again bool
	}{
		{"many commands", 250, execflow.TimerSlack.Nanoseconds(), false},
		{"many commands, a state file", 250, execflow.TimerSlack.Nanoseconds(), true},
		{"few commands", 3, own, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var wf strings.Builder
			wf.WriteString("jobs:\n")
			for i := range c.jobs - 1 {
				fmt.Fprintf(&wf, "  - {id: j%d, run: \"true\"}\n", i)
			}
			wf.WriteString(`  - id: probe
    run: cat /proc/self/timerslack_ns > own.txt; cat /proc/$PPID/timerslack_ns > poolrun.txt 2>/dev/null; echo $PPID > ppid.txt; env > env.txt; cat /proc/$$/stat > own-stat.txt; cat /proc/$PPID/stat > poolrun-stat.txt
    outputs: [own.txt]
`)
			if err := os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(wf.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			if c.again {
				if r := poolrun(t, dir, "run", "-j", "2", "--quiet", "wf.yaml"); r.code != 0 {
					t.Fatalf("poolrun run: status %d\n%s", r.code, r.stderr)
				}
				if _, err := os.Stat(execflow.StateFile(filepath.Join(dir, "wf.yaml"))); err != nil {
					t.Fatalf("no state file after the first run: %v", err)
				}
			}
			r := poolrun(t, dir, "run", "-j", "2", "--quiet", "--force", "wf.yaml")
			if r.code != 0 {
				t.Fatalf("poolrun run: status %d\n%s", r.code, r.stderr)
			}
			if got, ok := readSlack(filepath.Join(dir, "own.txt")); !ok || got != own {
				t.Errorf("a command's timer slack is %d (read: %v), want poolrun's at its start, %d", got, ok, own)
			}
			if got, ok := readSlack(filepath.Join(dir, "poolrun.txt")); ok && got != c.want {
				t.Errorf("poolrun's timer slack is %d, want %d", got, c.want)
			} else if !ok {
				t.Log("poolrun's timer slack could not be read: not checked")
			}
			env, err := os.ReadFile(filepath.Join(dir, "env.txt"))
			if err != nil {
				t.Fatal(err)
			}
			for _, marker := range []string{"TIMER_SLACK", "SCHED_BATCH"} {
				if strings.Contains(string(env), execflow.EnvPrefix+marker) {
					t.Errorf("a command sees poolrun's marker %s:\n%s", execflow.EnvPrefix+marker, env)
				}
			}
			// The scheduling policy: SCHED_BATCH (3) for a poolrun that
			// raised its slack, if it started as SCHED_OTHER (0); its
			// commands get the one it started with.
			wantPolicy := ownPolicy
			if c.want != own && ownPolicy == "0" {
				wantPolicy = "3"
			}
			if got := policyOf(t, filepath.Join(dir, "own-stat.txt")); got != ownPolicy {
				t.Errorf("a command's scheduling policy is %s, want poolrun's at its start, %s", got, ownPolicy)
			}
			if got := policyOf(t, filepath.Join(dir, "poolrun-stat.txt")); got != wantPolicy {
				t.Errorf("poolrun's scheduling policy is %s, want %s", got, wantPolicy)
			}
		})
	}
}

// policyOf returns the scheduling policy (field 41) of the /proc/PID/stat
// copy at path.
func policyOf(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The command's name, in parentheses, may hold spaces: count after it.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 39 {
		t.Fatalf("%s: %d fields after the name, want 39 or more:\n%s", path, len(fields), s)
	}
	return fields[38] // field 41 of the whole line: 3 before these
}

// TestRunTimerSlackFromPipe: a workflow of many commands read from a pipe
// (poolrun run <(generate-workflow)) is refused at once, with exit status
// 2 and the advice to write it to a file, before poolrun starts again or
// anything runs: a workflow is read from a regular file only.
func TestRunTimerSlackFromPipe(t *testing.T) {
	dir := t.TempDir()
	var wf strings.Builder
	wf.WriteString("jobs:\n")
	for i := range 250 {
		fmt.Fprintf(&wf, "  - {id: j%d, run: \"echo j%d >> ran.txt\"}\n", i, i)
	}
	// What <(generate-workflow) gives: a pipe, as /dev/fd/N, here already
	// holding the whole workflow (less than a pipe's buffer).
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if _, err := pw.WriteString(wf.String()); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	r := poolrunWithin(t, dir, oddTimeout, []*os.File{pr}, "run", "-j", "2", "--quiet", "/dev/fd/3")
	if r.code != 2 {
		t.Errorf("poolrun run from a pipe: status %d, want 2\n%s", r.code, r.stderr)
	}
	if want := "/dev/fd/3: is a named pipe (FIFO), not a regular file; write the workflow to a file first"; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr %q does not contain %q", r.stderr, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran.txt")); err == nil {
		t.Error("commands ran")
	}
}
