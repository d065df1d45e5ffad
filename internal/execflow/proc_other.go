//go:build !linux

package execflow

import (
	"os"
	"syscall"
)

// sysProcAttr: a command has a process group of its own. Without a
// parent-death signal, a command outlives a worker that dies abruptly.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// onMemoryFS reports whether path is on a file system held in memory; it
// is not known here.
func onMemoryFS(string) bool { return false }

// exitWait waits for a command's exit in wait4, which reaps it: a signal
// sent through its pid between its exit and the end of wait could reach
// a process that took the pid, as with os.Process where there are no
// pidfds.
type exitWait struct {
	ws  syscall.WaitStatus
	ru  syscall.Rusage
	err error
}

func (*exitWait) sysProcAttr() *syscall.SysProcAttr { return sysProcAttr() }

// wait returns once command pid has exited, reaped.
func (e *exitWait) wait(pid int) { e.ws, e.err = reap(pid, &e.ru) }

// reap returns what wait found.
func (e *exitWait) reap(_ int, ru *syscall.Rusage) (syscall.WaitStatus, error) {
	*ru = e.ru
	return e.ws, e.err
}

// maxrssUnit is the unit of Rusage.Maxrss in bytes: macOS gives bytes.
const maxrssUnit = 1

// flockHolder returns the process that holds a flock(2) lock of the file
// that f is open on; it is not known here (0).
func flockHolder(*os.File) int { return 0 }
