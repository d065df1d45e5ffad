//go:build linux

package execflow

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr: a command has a process group of its own (so that it can be
// stopped as a whole, and a terminal's Ctrl-C reaches poolrun alone), and
// its shell is killed when the process that started it dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// Linux sends the parent-death signal when the thread that forked the child
// ends, not the process, and the Go runtime may end threads. Commands are
// therefore started from one OS thread that lives as long as the process.
var starter struct {
	once sync.Once
	reqs chan startReq
}

type startReq struct {
	cmd  *exec.Cmd
	done chan error
}

// startCommand starts cmd from the starter thread.
func startCommand(cmd *exec.Cmd) error {
	starter.once.Do(func() {
		starter.reqs = make(chan startReq)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread stays ours
			for r := range starter.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	starter.reqs <- startReq{cmd, done}
	return <-done
}

// onMemoryFS reports whether path is on a file system held in memory.
func onMemoryFS(path string) bool {
	var st unix.Statfs_t
	if unix.Statfs(path, &st) != nil {
		return false
	}
	return st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC
}
