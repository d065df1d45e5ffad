//go:build linux

package engine

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// workerSysProcAttr: a worker gets SIGTERM when its parent dies, and its own
// process group, so that a terminal's Ctrl-C reaches the parent alone, which
// then stops the workers in order.
func workerSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
}

// spawner starts workers from one OS thread that lives as long as the pool:
// Linux sends the parent-death signal when the thread that forked a child
// exits, not the process, and the Go runtime may end threads.
type spawner struct {
	reqs chan spawnReq
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq)}
	go func() {
		runtime.LockOSThread()
		for r := range s.reqs {
			r.done <- r.cmd.Start()
		}
		// Unlocking keeps the thread alive in the runtime's hands: the
		// workers started from it must outlive this goroutine.
		runtime.UnlockOSThread()
	}()
	return s
}

func (s *spawner) start(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	s.reqs <- spawnReq{cmd, done}
	return <-done
}

func (s *spawner) close() { close(s.reqs) }

// setPipeSize enlarges a pipe to 1 MiB (the default limit for unprivileged
// processes), so that a burst of job frames rarely makes a writer wait.
func setPipeSize(f *os.File) {
	if sc, err := f.SyscallConn(); err == nil {
		sc.Control(func(fd uintptr) { unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20) })
	}
}
