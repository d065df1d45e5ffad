//go:build linux

package engine

import (
	"encoding/binary"
	"os"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolrun/poolrun/internal/spawn"
)

// monoNow is CLOCK_MONOTONIC in nanoseconds: one clock for every process
// of the host, in which a lease's end is written (WorkerProcess.Lease).
func monoNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// holdLease is the lease watch of a worker process of StartWorkerProcess:
// it reads the ends of the leases its starter gives it on f (8 bytes
// each, big-endian, in monoNow's clock), stops its commands when the
// latest has ended, and continues them when a later one comes. A worker
// given no lease yet stops nothing. At the end of f (its starter has
// died) it kills them, and returns.
func holdLease(f *os.File) {
	defer runtime.KeepAlive(f) // its finalizer would close fd
	fd := int(f.Fd())
	var until int64 // the latest lease's end; 0: none yet
	stopped := false
	buf := make([]byte, 8*64)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		timeout := -1
		if until > 0 && !stopped {
			// Rounded up: at the poll's end, the lease has ended.
			timeout = int(max(0, (until-monoNow()+int64(time.Millisecond)-1)/int64(time.Millisecond)))
		}
		n, err := unix.Poll(fds, timeout)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return // no lease to hold
		}
		if n == 0 {
			if monoNow() >= until {
				signalOwnCommands(syscall.SIGSTOP)
				stopped = true
			}
			continue
		}
		k, err := unix.Read(fd, buf)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if k <= 0 {
			// The starter is gone: nobody else can end the commands.
			for range 10 {
				if spawn.KillTagged(ownCommands()) == 0 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			return
		}
		for b := buf[:k-k%8]; len(b) > 0; b = b[8:] {
			until = max(until, int64(binary.BigEndian.Uint64(b)))
		}
		if stopped && monoNow() < until {
			signalOwnCommands(syscall.SIGCONT)
			stopped = false
		}
	}
}

// signalOwnCommands sends sig to the commands of this worker's jobs, and
// what they started (see ownCommands). A stop goes twice: a process that
// forked while the others were being stopped is found the second time.
func signalOwnCommands(sig syscall.Signal) {
	mine := ownCommands()
	spawn.SignalTagged(mine, sig)
	if sig == syscall.SIGSTOP {
		spawn.SignalTagged(mine, sig)
	}
}

// ownCommands matches the processes whose spawn.OwnerEnv mark names this
// process as their worker.
func ownCommands() func(entry string) bool {
	self := spawn.Tag(os.Getpid())
	return func(entry string) bool {
		return spawn.Marked(entry, func(_, worker string) bool { return worker == self })
	}
}
