//go:build !linux

package engine

import (
	"os"
	"syscall"
)

// workerSysProcAttr: a process group of its own (see proc_linux.go);
// without a parent-death signal, workers watch their parent's process id
// instead (see watchParent).
func workerSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func setPipeSize(*os.File) {}
