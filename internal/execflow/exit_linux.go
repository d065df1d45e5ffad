//go:build linux

package execflow

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// exitWait waits for a command's exit in waitid, which holds a thread
// while the command runs and leaves it unreaped: its pid still names it,
// and its group, for the signals of its context, until reap.
type exitWait struct{}

// sysProcAttr returns the SysProcAttr of the command (see the other
// sysProcAttr).
func (*exitWait) sysProcAttr() *syscall.SysProcAttr { return sysProcAttr() }

// wait returns once command pid has exited; it is not reaped.
func (*exitWait) wait(pid int) {
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
}

// reap reaps command pid, which wait saw exit; ru receives its resource
// usage.
func (*exitWait) reap(pid int, ru *syscall.Rusage) (syscall.WaitStatus, error) { return reap(pid, ru) }

// maxrssUnit is the unit of Rusage.Maxrss in bytes: KiB on Linux.
const maxrssUnit = 1024
