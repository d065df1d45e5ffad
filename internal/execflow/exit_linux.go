//go:build linux

package execflow

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// exitWait waits for a command's exit through its pidfd, in the runtime's
// poller: the goroutine that waits holds no thread. Without a pidfd (a
// kernel older than 5.3), or one the poller does not take, it waits in
// waitid, which holds a thread.
type exitWait struct {
	pidfd int
}

// exitNoPidfd makes exitWait do without the commands' pidfds, as on an
// old kernel: a test's.
var exitNoPidfd = false

// sysProcAttr returns the SysProcAttr of the command (see the other
// sysProcAttr), which asks for its pidfd.
func (e *exitWait) sysProcAttr() *syscall.SysProcAttr {
	sys := sysProcAttr()
	e.pidfd = -1
	sys.PidFD = &e.pidfd
	return sys
}

// wait returns once command pid has exited; it is not reaped, so that its
// pid still names it (and its group) until reap. It closes the pidfd.
func (e *exitWait) wait(pid int) {
	if exitNoPidfd && e.pidfd >= 0 {
		unix.Close(e.pidfd)
		e.pidfd = -1
	}
	if e.pidfd >= 0 && e.pollWait() {
		return
	}
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
}

// pollWait waits for the pidfd to read as ready, which it does once its
// process has exited, and closes it. It reports false, at once, when the
// poller does not take it.
func (e *exitWait) pollWait() bool {
	if err := unix.SetNonblock(e.pidfd, true); err != nil {
		unix.Close(e.pidfd)
		return false
	}
	f := os.NewFile(uintptr(e.pidfd), "pidfd") // non-blocking: in the poller
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	return rc.Read(func(fd uintptr) bool {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(p, 0)
		return n > 0 || err != nil && err != unix.EINTR
	}) == nil
}

// reap reaps command pid, which wait saw exit.
func (e *exitWait) reap(pid int) (syscall.WaitStatus, error) { return reap(pid) }
