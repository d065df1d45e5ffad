package execflow

import (
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/poolrun/poolrun/internal/spawn"
)

// OwnerEnv is the environment variable that marks every command poolrun
// runs, and what that command starts in turn, so that poolrun finds them
// wherever they went (a process group or session of their own, another
// parent). Its value is a list of pairs "POOL:WORKER" separated by
// spaces, outermost first. The last is the pair of the pool that runs the
// command: the tags of the pool's process and of the worker process that
// runs it (the same in serial mode). Those before it are the mark of the
// pool's process itself, when a command of another poolrun started it (a
// nested run). A tag is "PID.START": a process's id and its start time in
// clock ticks after the system's boot ([spawn.StartTime]; 0 where it
// cannot be read), which tell it from any process that had or will have
// its pid.
//
// When a worker process dies, the pool ends the processes whose mark has a
// pair of the pool's tag and the dead worker's ([ScratchCleanup]); when
// the pool's process dies, its [Janitor] ends those whose mark has a pair
// with that process's tag; Ctrl-Z stops, and fg continues, the same
// ([Suspend]). An inner run's commands bear the outer run's pairs too, and
// end or stop with the outer run's.
const OwnerEnv = spawn.OwnerEnv

// owner is this process's pair in OwnerEnv: its pool's tag, and its own.
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

// ownerEntry returns the OwnerEnv entry of a command that this process
// runs, outer being this process's own value of OwnerEnv ("" for none).
func ownerEntry(outer string) string {
	if outer = strings.TrimSpace(outer); outer != "" {
		return OwnerEnv + "=" + outer + " " + owner()
	}
	return OwnerEnv + "=" + owner()
}
