package execflow

import (
	"os"
	"slices"
	"sync"
	"syscall"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/spawn"
)

// groups are the process groups of the commands this process runs, by
// group id: in serial mode, the pool's own process runs them. Like the
// scratch folders, this state belongs to the process, as its children do.
type groups struct {
	mu  sync.Mutex
	ids map[int]struct{}
}

var running = &groups{ids: map[int]struct{}{}}

func (g *groups) add(pgid int) {
	g.mu.Lock()
	g.ids[pgid] = struct{}{}
	g.mu.Unlock()
}

func (g *groups) remove(pgid int) {
	g.mu.Lock()
	delete(g.ids, pgid)
	g.mu.Unlock()
}

func (g *groups) list() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]int, 0, len(g.ids))
	for id := range g.ids {
		out = append(out, id)
	}
	return out
}

// Suspend stops (SIGSTOP) every process that runs p's work, and returns
// the function that continues (SIGCONT) them; call it once. It is the
// first half of a terminal's Ctrl-Z, which reaches the pool's process only:
// its workers, and the commands they run, are in process groups of their
// own (see the engine), so the caller stops itself after Suspend, and
// resumes the work once it is continued.
//
// The processes stopped are the process group of each worker process of p,
// every process of this user's marked as a command of this pool or a
// process a command started, an inner run's included (its [OwnerEnv] mark
// has a pair with this process's tag; found in /proc, on Linux), and the
// process group of every command this process runs itself (serial mode).
// A process that drops the mark from its environment escapes, unless it
// stays in its command's process group. A worker started meanwhile (to
// replace one that died) is not stopped but is continued.
func Suspend(p *engine.Pool) (resume func()) {
	stopped := workPIDs(p)
	local := running.list()
	mine := spawn.OwnedByPool(selfTag())
	// Twice: a process that forked while the others were being stopped
	// is found the second time.
	for range 2 {
		for _, pid := range stopped {
			syscall.Kill(-pid, syscall.SIGSTOP)
		}
		spawn.SignalTagged(mine, syscall.SIGSTOP)
		for _, pgid := range local {
			syscall.Kill(-pgid, syscall.SIGSTOP)
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			spawn.SignalTagged(mine, syscall.SIGCONT)
			for _, pgid := range union(local, running.list()) {
				syscall.Kill(-pgid, syscall.SIGCONT)
			}
			for _, pid := range union(stopped, workPIDs(p)) {
				syscall.Kill(-pid, syscall.SIGCONT)
			}
		})
	}
}

// workPIDs returns the pids of p's worker processes, this one excepted (in
// serial mode, the pool's process is its worker).
func workPIDs(p *engine.Pool) []int {
	var pids []int
	for _, w := range p.Stats().Workers {
		if w.PID > 0 && w.PID != os.Getpid() {
			pids = append(pids, w.PID)
		}
	}
	return pids
}

func union(a, b []int) []int {
	seen := make(map[int]bool, len(a)+len(b))
	var out []int
	for _, v := range slices.Concat(a, b) {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
