//go:build !linux

package spawn

import (
	"errors"
	"syscall"
)

// SignalTagged finds processes by their environment in /proc, which only
// Linux has; elsewhere it signals none and returns 0.
func SignalTagged(match func(entry string) bool, sig syscall.Signal) int { return 0 }

// KillTagged is SignalTagged's: elsewhere it kills none and returns 0.
func KillTagged(match func(entry string) bool) int { return 0 }

// StartTime reads a process's start time from /proc, which only Linux
// has; elsewhere it returns 0 and errors.ErrUnsupported.
func StartTime(pid int) (uint64, error) { return 0, errors.ErrUnsupported }
