//go:build linux

package execflow

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr: a command has a process group of its own (so that it can be
// stopped as a whole, and a terminal's Ctrl-C reaches poolrun alone), and
// its shell is killed when the thread that forked it ends. The Go runtime
// ends a thread only when a goroutine locked to it exits still locked, which
// no goroutine of this program does (package spawn's thread lives as long
// as the process), so in effect the signal comes when the process dies;
// the janitor covers a process killed outright all the same.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// onMemoryFS reports whether path is on a file system held in memory.
func onMemoryFS(path string) bool {
	var st unix.Statfs_t
	if unix.Statfs(path, &st) != nil {
		return false
	}
	return st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC
}

// flockHolder returns the process that holds a flock(2) lock of the file
// that f is open on, as /proc/locks says ("1: FLOCK ADVISORY WRITE PID
// MAJOR:MINOR:INODE 0 EOF", the device's numbers in hexadecimal); 0 if it
// says none.
func flockHolder(f *os.File) int {
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	data, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		// A waiter's line has "->" after the number.
		if f := strings.Fields(line); len(f) >= 6 && f[1] == "FLOCK" && f[5] == id {
			pid, _ := strconv.Atoi(f[4])
			return pid
		}
	}
	return 0
}
