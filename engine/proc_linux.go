//go:build linux

package engine

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// workerSysProcAttr: a worker gets SIGTERM when its parent dies, and its own
// process group, so that a terminal's Ctrl-C reaches the parent alone,
// which then stops the workers in order; and so that when a worker has
// gone the parent can end what its jobs started and left in the group
// (see processLink.wait). Workers are started by internal/spawn, from a
// thread that lives as long as the parent, so that the signal fires when
// the parent dies and not before. (Not a session of their own: the kernel
// then schedules each as a group of its own, autogroup, which slows a
// worker's round trips with its parent.)
func workerSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
}

// setPipeSize enlarges a pipe to 1 MiB (the default limit for unprivileged
// processes), so that a burst of job frames rarely makes a writer wait.
func setPipeSize(f *os.File) {
	if sc, err := f.SyscallConn(); err == nil {
		sc.Control(func(fd uintptr) { unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20) })
	}
}
