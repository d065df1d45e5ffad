// Package preload reads the workflow file of "poolrun run FILE" while the
// rest of the program is initialised, on the processor that the
// initialisation leaves idle.
//
// A program imports it, as cmd/poolrun does through package cli, and
// reads its workflow with [Load]. Its init starts reading FILE, in a
// goroutine of its own, when the program's arguments are "run ... FILE"
// and it is the poolrun that package prestart (or poolrun run itself)
// re-executed with a larger timer slack: a run of many commands, whose
// arguments prestart checked (FILE is a regular file; no dry run, graph or
// help is asked for). Go initialises package workflow and the YAML
// library some 7 ms before main on a small machine, most of the packages
// of the cluster transport after them; reading 1,000 jobs takes 12 ms.
// In any other process (a worker, a janitor, a test) it does nothing, and
// [Load] reads the file when asked.
package preload

import (
	"os"
	"runtime"

	"github.com/poolrun/poolrun/internal/workflow"
)

// These mirror the values of the packages that own them, which this one
// does not import (a test checks that they agree).
const (
	// slackEnv is execflow's slackEnv: the mark of a re-executed poolrun.
	slackEnv = "POOLRUN_TIMER_SLACK"
	// workerEnv is engine.WorkerEnv, janitorEnv execflow.JanitorEnv.
	workerEnv  = "POOLRUN_WORKER"
	janitorEnv = "POOLRUN_JANITOR"
)

// started is the read begun by init, if any.
var started *read

type read struct {
	path string
	done chan struct{}
	wf   *workflow.Workflow
	err  error
}

func init() {
	path, ok := runFile(os.Args)
	if !ok {
		return
	}
	r := &read{path: path, done: make(chan struct{})}
	started = r
	go func() {
		defer close(r.done)
		r.wf, r.err = workflow.Load(path)
	}()
	// The goroutine waits in this processor's next slot, which another
	// processor takes only after a pause that the timer slack stretches
	// to as much as 10 ms: let it start here, now.
	runtime.Gosched()
}

// runFile returns the workflow file of a re-executed "poolrun run FILE",
// whose arguments are args.
func runFile(args []string) (string, bool) {
	if len(args) < 3 || args[1] != "run" {
		return "", false
	}
	for _, name := range []string{workerEnv, janitorEnv} {
		if _, ok := os.LookupEnv(name); ok {
			return "", false
		}
	}
	if _, ok := os.LookupEnv(slackEnv); !ok {
		return "", false
	}
	file := args[len(args)-1]
	if file == "" || file[0] == '-' {
		return "", false
	}
	if fi, err := os.Stat(file); err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	return file, true
}

// Load returns what workflow.Load(path) returns: the workflow that this
// package's init began to read, once read, when it is path's and nobody
// took it yet, or else the file read now.
func Load(path string) (*workflow.Workflow, error) {
	if r := started; r != nil && r.path == path {
		started = nil
		<-r.done
		return r.wf, r.err
	}
	return workflow.Load(path)
}
