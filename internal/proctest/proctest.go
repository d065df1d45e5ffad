// Package proctest has helpers for tests that watch processes through
// /proc: whether a process is alive, its state, children, command line and
// environment, the processes that match a test, waiting for them to go,
// and the descriptors this process holds.
package proctest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// stat returns the state and parent of process pid from /proc/PID/stat.
func stat(pid int) (state string, ppid int, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, false
	}
	// The state and parent follow the command name, in parentheses.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return "", 0, false
	}
	if _, err := fmt.Sscan(s[i+2:], &state, &ppid); err != nil {
		return "", 0, false
	}
	return state, ppid, true
}

// State returns the state of process pid as /proc/PID/stat gives it ("R",
// "S", "D", "T", "Z", ...), or "" if there is no such process.
func State(pid int) string {
	state, _, _ := stat(pid)
	return state
}

// Alive reports whether pid is a running process (not a zombie).
func Alive(pid int) bool {
	state, _, ok := stat(pid)
	return ok && state != "Z" && state != "X"
}

// ParentOf returns the parent of process pid, or 0 if it is not there.
func ParentOf(pid int) int {
	_, ppid, _ := stat(pid)
	return ppid
}

// Children returns the live processes whose parent is pid.
func Children(pid int) []int {
	var kids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var p int
		if _, err := fmt.Sscan(filepath.Base(e.Name()), &p); err != nil {
			continue
		}
		if state, ppid, ok := stat(p); ok && ppid == pid && state != "Z" && state != "X" {
			kids = append(kids, p)
		}
	}
	return kids
}

// WaitGone waits up to limit for every pid to be gone and returns those
// still alive then.
func WaitGone(pids []int, limit time.Duration) []int {
	deadline := time.Now().Add(limit)
	for {
		var left []int
		for _, p := range pids {
			if Alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Buffer is a bytes.Buffer that a process's output copier and a test may
// use at once (exec.Cmd copies a non-file Stdout or Stderr in a goroutine
// of its own).
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Find returns the live processes for which match, given a file of the
// process's folder in /proc ("cmdline", "environ") as read, is true;
// name says which file.
func Find(name string, match func(data []byte) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), name))
		if err == nil && match(data) && Alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Cmdline returns the arguments of process pid, from /proc/PID/cmdline, or
// nil if there is no such process or it has none (a zombie).
func Cmdline(pid int) []string { return fields(pid, "cmdline") }

// Environ returns the environment of process pid, from /proc/PID/environ,
// or nil if there is no such process or it cannot be read (another user's).
func Environ(pid int) []string { return fields(pid, "environ") }

// fields returns the NUL-ended strings of the file name of pid's folder in
// /proc.
func fields(pid int, name string) []string {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), name))
	if err != nil || len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
}

// FDs returns the descriptors this process holds open, by number, each
// with what it names: the target of its link in /proc/self/fd.
func FDs() (map[int]string, error) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	fds := map[int]string{}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// The folder's own descriptor is closed by now and has no link.
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil {
			fds[fd] = target
		}
	}
	return fds, nil
}

// InheritedFDs returns those of [FDs] above 2 that are not close-on-exec:
// the descriptors a child started now would inherit beyond its standard
// ones.
func InheritedFDs() (map[int]string, error) {
	fds, err := FDs()
	if err != nil {
		return nil, err
	}
	for fd := range fds {
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); fd <= 2 || err != nil || flags&unix.FD_CLOEXEC != 0 {
			delete(fds, fd)
		}
	}
	return fds, nil
}

// Poll checks cond every period until it holds, ctx ends, or a minute
// passes; the error says what it waited for (what).
func Poll(ctx context.Context, what string, period time.Duration, cond func() bool) error {
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("waited a minute for %s", what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		case <-time.After(period):
		}
	}
	return nil
}
