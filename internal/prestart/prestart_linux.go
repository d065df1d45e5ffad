//go:build linux

package prestart

import (
	"os"
	"syscall"
	"unsafe"

	"github.com/poolrun/poolrun/internal/regfile"
)

// It imports os, syscall and regfile alone (regfile imports only what os
// does): a package it imports must be initialised before it, and Go
// initialises the ready packages in the order of their import paths, most
// of which come before this one's (bytes, strconv, strings and
// path/filepath would wait for many).

// prctl options (linux/prctl.h), and scheduling policies (linux/sched.h).
const (
	prSetTimerSlack = 29
	prGetTimerSlack = 30
	schedOther      = 0
	schedBatch      = 3
)

func init() {
	if len(os.Args) > 2 && os.Args[1] == "run" && wantsSlack(os.Args[2:]) {
		coalesceWakeups()
	}
}

// wantsSlack reports whether the arguments of poolrun run, args, ask to
// run a workflow file with at least ManyCommands jobs and no state file.
// The file is the last argument: the flags come before it.
func wantsSlack(args []string) bool {
	file := args[len(args)-1]
	if file == "" || file[0] == '-' {
		return false
	}
	for _, a := range args[:len(args)-1] {
		if a == "--" {
			return false
		}
		if a == "" || a[0] != '-' {
			continue // a flag's value
		}
		switch flagName(a) {
		case "n", "dry-run", "dag", "h", "help":
			return false
		}
	}
	if _, err := os.Lstat(stateFile(file)); err == nil {
		return false
	}
	return countJobs(file) >= ManyCommands
}

// countJobs returns the number of "run:" in the regular file at path,
// what a job's command follows (an item's too: an upper bound); 0 when
// it is not a regular file (a FIFO is not even opened: see
// regfile.Open), cannot be read or holds more than maxCount bytes.
func countJobs(path string) int {
	data, err := regfile.ReadFile(path, maxCount)
	if err != nil {
		return 0
	}
	return count(data, "run:")
}

// flagName returns the name of the flag argument a: without its one or
// two dashes and its "=value".
func flagName(a string) string {
	for i := 0; i < 2 && len(a) > 0 && a[0] == '-'; i++ {
		a = a[1:]
	}
	for i := range len(a) {
		if a[i] == '=' {
			return a[:i]
		}
	}
	return a
}

// stateFile is execflow.StateFile: ".NAME" + StateSuffix beside the
// workflow file NAME.
func stateFile(path string) string {
	i := len(path) - 1
	for i >= 0 && path[i] != '/' {
		i--
	}
	return path[:i+1] + "." + path[i+1:] + StateSuffix
}

// count returns the number of non-overlapping s in b.
func count(b []byte, s string) int {
	n := 0
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			n++
			i += len(s) - 1
		}
	}
	return n
}

// itoa formats u in decimal.
func itoa(u uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + u%10)
		if u /= 10; u == 0 {
			return string(b[i:])
		}
	}
}

// coalesceWakeups re-executes the program with its timer slack raised to
// TimerSlack, and as SCHED_BATCH if it ran as SCHED_OTHER, as
// execflow.CoalesceWakeups does, and returns only if it did not. Package
// initialisation runs on the main thread, locked to it: the slack, the
// policy and the exec are that thread's.
func coalesceWakeups() {
	if _, done := syscall.Getenv(SlackEnv); done {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	before, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prGetTimerSlack, 0, 0)
	if errno != 0 {
		return
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, TimerSlack, 0); errno != 0 {
		return
	}
	env := append(os.Environ(), SlackEnv+"="+itoa(uint64(before)))
	// SCHED_BATCH too, from SCHED_OTHER (execflow.CoalesceWakeups says why).
	var prio int32 // struct sched_param
	policy, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETSCHEDULER, 0, 0, 0)
	batch := errno == 0 && policy == schedOther
	if batch {
		_, _, errno = syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, 0, schedBatch, uintptr(unsafe.Pointer(&prio)))
		batch = errno == 0
	}
	if batch {
		env = append(env, BatchEnv+"=1")
	}
	syscall.Exec(exe, os.Args, env) // returns only when it failed
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, before, 0)
	if batch {
		syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, 0, schedOther, uintptr(unsafe.Pointer(&prio)))
	}
}
