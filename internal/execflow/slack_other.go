//go:build !linux

package execflow

// CoalesceWakeups does nothing here (see slack_linux.go).
func CoalesceWakeups() {}
