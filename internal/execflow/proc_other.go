//go:build !linux

package execflow

import "syscall"

// sysProcAttr: a command has a process group of its own. Without a
// parent-death signal, a command outlives a worker that dies abruptly.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// onMemoryFS reports whether path is on a file system held in memory; it
// is not known here.
func onMemoryFS(string) bool { return false }

// exitWatch: os/exec's wait, as it is, elsewhere than on Linux.
type exitWatch struct{}

func newExitWatch() *exitWatch { return &exitWatch{} }

func (w *exitWatch) attr(a *syscall.SysProcAttr) *syscall.SysProcAttr { return a }
func (w *exitWatch) wait()                                            {}
func (w *exitWatch) close()                                           {}
