package main_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
	args := []string{"build", "-o", poolrunBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
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

// poolrun runs the binary in dir with args and returns what it printed and
// its exit status.
func poolrun(t *testing.T, dir string, args ...string) result {
	t.Helper()
	cmd := exec.Command(poolrunBin, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("poolrun %v: %v", args, err)
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

// children returns the process ids whose parent is pid.
func children(pid int) []int {
	var kids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var p int
		if _, err := fmt.Sscan(e.Name(), &p); err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		var state string
		var ppid int
		if i < 0 {
			continue
		}
		fmt.Sscan(s[i+2:], &state, &ppid)
		if ppid == pid && state != "Z" {
			kids = append(kids, p)
		}
	}
	return kids
}

// alive reports whether pid is a running process (not a zombie).
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// waitGone waits up to limit for every pid to be gone and returns those
// still alive.
func waitGone(pids []int, limit time.Duration) []int {
	deadline := time.Now().Add(limit)
	for {
		var left []int
		for _, p := range pids {
			if alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var _ = syscall.SIGINT
