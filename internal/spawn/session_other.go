//go:build !linux

package spawn

import "syscall"

// SignalSession sends sig to the process group sid (elsewhere than on
// Linux, the processes of a session are not listed; a session's leader
// also leads its first process group) and returns 1 if that succeeded.
func SignalSession(sid int, sig syscall.Signal) int {
	if sid <= 1 || syscall.Kill(-sid, sig) != nil {
		return 0
	}
	return 1
}
