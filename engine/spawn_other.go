//go:build !linux

package engine

import (
	"os"
	"os/exec"
	"syscall"
)

func workerSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// spawner starts workers; without a parent-death signal, workers watch their
// parent process id instead.
type spawner struct{}

func newSpawner() *spawner                   { return &spawner{} }
func (s *spawner) start(cmd *exec.Cmd) error { return cmd.Start() }
func (s *spawner) close()                    {}

func setPipeSize(*os.File) {}
