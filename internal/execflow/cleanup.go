package execflow

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/spawn"
)

// deathWait bounds how long the removal of a dead worker's scratch folder
// waits for the worker's process to be gone (reaped), should the event
// come first: past it, the folder is left to [SweepScratch].
const deathWait = 2 * time.Second

// removeTries is how many times the removal of a dead worker's scratch
// folder is tried: a process of the worker's that is being killed may still
// create a file in it while it is removed.
const removeTries = 3

// ScratchCleanup returns the pool option that kills what a worker
// process's commands left running (the processes of this user's whose
// [OwnerEnv] mark has a pair of the pool's tag and the dead worker's, an
// inner run's included) and removes its scratch folder, the moment the
// worker ends other than by the pool's normal stop (an
// [engine.WorkerDied] event): a worker killed with SIGKILL cannot do
// either itself, and its artefacts are of no use to anyone.
// Give it to engine.New of a pool on which workflows are queued with the
// same opts (their scratch root); the pool's Run returns only once the
// folders of the workers that died are removed.
//
// A folder is removed only with the proofs [SweepScratch] asks for: its
// name is poolrun-<pid>-<suffix> with the dead worker's pid, it is a real
// folder of this user's with mode 0700, it holds poolrun's marker naming
// that pid, and no process with that pid runs any more (the removal waits
// for that for at most a couple of seconds; past that, the folder is left
// to the next sweep). The in-process worker of serial mode (this process's
// pid) is left alone. Failures are printed on standard error.
func ScratchCleanup(opts Options) engine.Option {
	root := opts.Scratch
	if root == "" {
		root = DefaultScratch()
	}
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	return engine.OnEvent(func(e engine.Event) {
		if e.Kind != engine.WorkerDied || e.PID <= 0 || e.PID == os.Getpid() {
			return
		}
		// What its commands started and left running ends with it. The
		// worker was reaped before the event: a process that has its pid
		// now is another, whose tag is not the dead worker's.
		dead, successor := strconv.Itoa(e.PID)+".", spawn.Tag(e.PID)
		spawn.SignalTagged(func(entry string) bool {
			return spawn.Marked(entry, func(pool, worker string) bool {
				return pool == selfTag() && strings.HasPrefix(worker, dead) && worker != successor
			})
		}, syscall.SIGKILL)
		if err := removeScratchOf(root, e.PID); err != nil {
			fmt.Fprintf(os.Stderr, "poolrun: removing the scratch folder of worker %d (pid %d): %v\n", e.Worker, e.PID, err)
		}
	})
}

// removeScratchOf removes from root the scratch folders of process pid,
// which has ended or is ending, once [stale] proves them its own and its
// process gone.
func removeScratchOf(root string, pid int) error {
	dirs, err := filepath.Glob(filepath.Join(root, scratchPrefix+strconv.Itoa(pid)+"-*"))
	if err != nil || len(dirs) == 0 {
		return err
	}
	deadline := time.Now().Add(deathWait)
	for _, dir := range dirs {
		for !stale(dir, filepath.Base(dir)) {
			// Not (yet) provably stale: the process may still be there,
			// as a zombie not reaped yet. Anything else (no marker, another
			// owner, a link) stays stale-proof however long one waits.
			if !processAlive(pid) || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if !stale(dir, filepath.Base(dir)) {
			continue
		}
		for try := 1; ; try++ {
			err = os.RemoveAll(dir)
			if err == nil || try == removeTries {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
