//go:build linux

package execflow

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr: a command has a process group of its own (so that it can be
// stopped as a whole, and a terminal's Ctrl-C reaches poolrun alone), and
// its shell is killed when the process that started it dies (spawn.Start
// makes the parent-death signal fire on the process's death, not a
// thread's).
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

// exitWatch waits for a command's exit in the runtime's network poller,
// through a pidfd, before os/exec reaps it: os/exec's own wait blocks a
// thread per command, and in a process that runs many commands at once
// among other goroutines (the pool's), the threads that this takes and
// gives back cost more CPU than the commands (bench/README.md, group 8).
// In a worker process, which does nothing else meanwhile, the blocking
// wait costs less, and it is kept there.
type exitWatch struct{ fd int }

func newExitWatch() *exitWatch { return &exitWatch{fd: -1} }

// attr asks for the child's pidfd in a, in the pool's process.
func (w *exitWatch) attr(a *syscall.SysProcAttr) *syscall.SysProcAttr {
	if inPoolProcess() {
		a.PidFD = &w.fd
	}
	return a
}

// wait returns once the started child has exited (it is not reaped: that
// is cmd.Wait's), or at once without a pidfd or if the poller cannot take
// it (cmd.Wait then blocks as usual). The pidfd is closed.
func (w *exitWatch) wait() {
	if w.fd < 0 {
		return
	}
	fd := w.fd
	w.fd = -1
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		// Done when the child has exited (a signal number in info) or
		// waitid fails; not ready yet otherwise: the poller waits.
		return err != nil || info.Signo != 0
	})
}

// close closes the pidfd if wait did not: the command did not start, or
// runShell returned before its wait.
func (w *exitWatch) close() {
	if w.fd >= 0 {
		syscall.Close(w.fd)
		w.fd = -1
	}
}
