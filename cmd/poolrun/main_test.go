package main_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// poolrunBin is the poolrun binary the tests drive, built once by TestMain.
var poolrunBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "poolrun-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	poolrunBin = filepath.Join(dir, "poolrun")
	// A race-enabled program sleeps a second when it exits (the race
	// detector's atexit_sleep_ms), which would count against the tests of
	// how fast processes go; the processes the tests start skip it.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	// poolrun-hub beside it, where poolrun run --listen finds it.
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".", "../poolrun-hub")...)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building poolrun:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is what a run of poolrun left.
type result struct {
	code           int
	stdout, stderr string
}

// runTimeout bounds a run of poolrun in the tests.
const runTimeout = 3 * time.Minute

// poolrun runs the binary in dir with args and returns what it printed and
// its exit status.
func poolrun(t *testing.T, dir string, args ...string) result {
	t.Helper()
	return runCommand(t, dir, poolrunBin, args...)
}

// runCommand runs the program name with args in dir and returns what it
// printed and its exit status. A run that hangs past runTimeout fails the
// test, with what it printed, instead of holding the package until go
// test's own timeout.
func runCommand(t *testing.T, dir, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s %v did not end within %v; it printed:\n%s%s", name, args, runTimeout, r.stdout, r.stderr)
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return r
}

// line returns the line of s that starts with prefix, without it.
func line(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}
