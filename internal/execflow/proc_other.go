//go:build !linux

package execflow

import (
	"context"
	"io"
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

// watchAvailable: commands are waited for as os/exec does, elsewhere
// than on Linux (see watch_linux.go).
func watchAvailable() bool { return false }

func runWatched(context.Context, shellCmd, *group, io.Writer, io.Writer, string, io.Writer) (syscall.WaitStatus, error, error) {
	panic("execflow: no watch here")
}
