package execflow

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/poolrun/poolrun/internal/spawn"
)

// OwnerEnv is the environment variable that marks every command poolrun
// runs, and what that command starts in turn, so that poolrun finds them
// wherever they went (a process group or session of their own, another
// parent). Its value is a list of owners "POOL:WORKER:COMMAND" separated
// by spaces, outermost first. The last is the owner of the command in the
// pool that runs it: the tags of the pool's process and of the worker
// process that runs it (the same in serial mode), and the command's
// number in that worker, which no other command of the worker has. Those
// before it are the mark of the pool's process itself, when a command of
// another poolrun started it (a nested run). A tag is "PID.START": a
// process's id and its start time in clock ticks after the system's boot
// ([spawn.StartTime]; 0 where it cannot be read), which tell it from any
// process that had or will have its pid.
//
// When a command has ended, the processes that bear its owner end too
// (see "Stopping" in the package documentation); when a worker process
// dies, the pool ends the processes whose mark has an owner of the pool's
// tag and the dead worker's ([ScratchCleanup]); when the pool's process
// dies, its [Janitor] ends those whose mark has an owner with that
// process's tag; Ctrl-Z stops, and fg continues, the same ([Suspend]). An
// inner run's commands bear the outer run's owners too, and end or stop
// with the outer run's.
const OwnerEnv = spawn.OwnerEnv

// owner is this process's part of an owner in OwnerEnv: its pool's tag,
// and its own.
var owner = sync.OnceValue(func() string {
	pool := selfTag()
	if !inPoolProcess() {
		pool = spawn.Tag(os.Getppid()) // a worker process, which its pool started
	}
	return pool + ":" + selfTag()
})

// selfTag is this process's tag in OwnerEnv.
var selfTag = sync.OnceValue(func() string { return spawn.Tag(os.Getpid()) })

// tagPID returns the pid of tag, and whether tag is well formed.
func tagPID(tag string) (int, bool) {
	pidText, start, ok := strings.Cut(tag, ".")
	pid, err := strconv.Atoi(pidText)
	_, serr := strconv.ParseUint(start, 10, 64)
	return pid, ok && err == nil && serr == nil && pid > 0
}

// ownerEntry returns the OwnerEnv entry of the commands that this
// process runs, outer being this process's own value of OwnerEnv ("" for
// none), less the command's number (see markCommand).
func ownerEntry(outer string) string {
	if outer = strings.TrimSpace(outer); outer != "" {
		return OwnerEnv + "=" + outer + " " + owner()
	}
	return OwnerEnv + "=" + owner()
}

// commands numbers the commands this process runs.
var commands atomic.Uint64

// markCommand gives the command whose environment is env (its own, which
// it changes) the next command number of this process, at the end of the
// OwnerEnv entry that ownerEntry made, and returns the command's owner;
// "" if env holds no such entry.
func markCommand(env []string) string {
	for i := len(env) - 1; i >= 0; i-- {
		chain, ok := strings.CutPrefix(env[i], OwnerEnv+"=")
		if !ok {
			continue
		}
		if chain != owner() && !strings.HasSuffix(chain, " "+owner()) {
			return ""
		}
		own := owner() + ":" + strconv.FormatUint(commands.Add(1), 10)
		env[i] += own[len(owner()):]
		return own
	}
	return ""
}
