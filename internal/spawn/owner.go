package spawn

import (
	"strconv"
	"strings"
)

// OwnerEnv is the environment variable that marks the processes that
// poolrun's jobs run, and what they start in turn, so that they can be
// found wherever they went ([SignalTagged]). Its value is a list of
// owners separated by spaces, outermost first. An owner is
// "POOL:WORKER:COMMAND": the tags ([Tag]) of the pool's process and of
// the worker process that runs the command, and the command's number in
// that worker (an owner written by an older poolrun has no number).
// Package execflow sets it and says more.
const OwnerEnv = "POOLRUN_OWNER"

// Tag returns the tag of process pid in OwnerEnv: "PID.START", its id and
// its start time in clock ticks after the system's boot ([StartTime]; 0
// where it cannot be read), which tell it from any process that had or
// will have its pid.
func Tag(pid int) string {
	start, _ := StartTime(pid)
	return strconv.Itoa(pid) + "." + strconv.FormatUint(start, 10)
}

// Marked reports whether entry, of a process's environment, is an
// OwnerEnv entry with an owner whose pool and worker tags match accepts.
func Marked(entry string, match func(pool, worker string) bool) bool {
	chain, ok := strings.CutPrefix(entry, OwnerEnv+"=")
	if !ok {
		return false
	}
	for owner := range strings.FieldsSeq(chain) {
		pool, rest, ok := strings.Cut(owner, ":")
		worker, _, _ := strings.Cut(rest, ":")
		if ok && match(pool, worker) {
			return true
		}
	}
	return false
}

// OwnedByPool returns the match, for [SignalTagged], of the processes of
// the pool whose process's tag is pool: its commands and what they
// started, an inner run's included. The commands of the workers of a host
// agent are the agent's: their pool is the worker's parent.
func OwnedByPool(pool string) func(entry string) bool {
	return func(entry string) bool {
		return Marked(entry, func(p, _ string) bool { return p == pool })
	}
}

// OwnedByCommands returns the match, for [SignalTagged], of the processes
// of the commands whose owners (whole: "POOL:WORKER:COMMAND") are in
// owners: each command and what it started, an inner run's included.
// The match reads owners: the caller must not change it meanwhile.
func OwnedByCommands(owners map[string]bool) func(entry string) bool {
	return func(entry string) bool {
		chain, ok := strings.CutPrefix(entry, OwnerEnv+"=")
		if !ok {
			return false
		}
		for owner := range strings.FieldsSeq(chain) {
			if owners[owner] {
				return true
			}
		}
		return false
	}
}
