//go:build linux

package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRunKeepsSchedulingPolicy: poolrun run changes neither its own timer
// slack nor its scheduling policy, and its commands run with the caller's,
// however many commands it runs (a user who wants SCHED_BATCH runs
// chrt -b 0 poolrun run ...). Where this process may not read another's
// slack (CAP_SYS_NICE), poolrun's is not checked.
func TestRunKeepsSchedulingPolicy(t *testing.T) {
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
	dir := t.TempDir()
	wf := `jobs:
  - id: j${i}
    foreach: {i: 1..250}
    run: "true"
  - id: probe
    run: cat /proc/self/timerslack_ns > own.txt; cat /proc/$PPID/timerslack_ns > poolrun.txt 2>/dev/null; cat /proc/$$/stat > own-stat.txt; cat /proc/$PPID/stat > poolrun-stat.txt
`
	if err := os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(wf), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := poolrun(t, dir, "run", "-j", "2", "--quiet", "wf.yaml"); r.code != 0 {
		t.Fatalf("poolrun run: status %d\n%s", r.code, r.stderr)
	}
	if got, ok := readSlack(filepath.Join(dir, "own.txt")); !ok || got != own {
		t.Errorf("a command's timer slack is %d (read: %v), want the caller's, %d", got, ok, own)
	}
	if got, ok := readSlack(filepath.Join(dir, "poolrun.txt")); !ok {
		t.Log("poolrun's timer slack could not be read: not checked")
	} else if got != own {
		t.Errorf("poolrun's timer slack is %d, want the caller's, %d", got, own)
	}
	for _, f := range []string{"own-stat.txt", "poolrun-stat.txt"} {
		if got := policyOf(t, filepath.Join(dir, f)); got != ownPolicy {
			t.Errorf("%s: scheduling policy %s, want the caller's, %s", f, got, ownPolicy)
		}
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

// TestRunFromPipe: a workflow read from a pipe (poolrun run
// <(generate-workflow)) is refused at once, with exit status 2 and the
// advice to write it to a file, before anything runs: a workflow is read
// from a regular file only.
func TestRunFromPipe(t *testing.T) {
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
