//go:build linux

package execflow

import (
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
