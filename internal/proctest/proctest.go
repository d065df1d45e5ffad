// Package proctest has helpers for tests that watch processes through
// /proc: whether a process is alive, its children, waiting for them to go.
package proctest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
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

// Alive reports whether pid is a running process (not a zombie).
func Alive(pid int) bool {
	state, _, ok := stat(pid)
	return ok && state != "Z" && state != "X"
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
