package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/workflow"
)

const runUsage = `Usage: poolrun run [flags] FILE

Runs the jobs of a YAML workflow FILE on a pool of worker processes. A job
runs a shell command (sh -c) once the jobs it comes after have succeeded.
An item is an artefact (a file or folder) that its own command builds, once
per worker that needs it, in that worker's private scratch folder (on a
memory file system where there is one); a job that needs item "ref" finds
its path in $POOLRUN_ITEM_REF. The artefact is deleted the moment no
unfinished job needs the item any more.

  items:
    ref:                          # item name -> how to build it
      run: zcat data/ref.gz > "$POOLRUN_ITEM"
  jobs:
    - id: split
      run: ./split input
    - id: align-${i}
      foreach: {i: 1..4}          # one job per value: align-1 ... align-4
      run: ./align --ref "$POOLRUN_ITEM_REF" part-${i}
      needs: [ref]
      after: [split]
      timeout: 10m                # fail it if it runs longer
    - id: merge
      run: ./merge part-*.out
      after: ["align-*"]          # globs over job ids

The workflow is checked before anything runs: an unknown field, a duplicate
id, an unknown dependency or item, a dependency cycle, a bad foreach or a
YAML error is reported as FILE:LINE: what is wrong (exit status 2). A
command that exits non-zero fails its job (exit status 1 at the end), with
its exit status and the last lines of its standard error in the messages
and the report; a job whose worker died is Aborted, and named the same way
(or, with --retries N, run again up to N times). A job that runs longer
than its timeout: (or --timeout, for jobs without one) fails; its command
gets SIGTERM, then SIGKILL. The other jobs go on unless --fail-fast.
Commands inherit poolrun's environment (less its POOLRUN_* variables) and
working folder, plus $POOLRUN_JOB (the job id), and no open file but
standard input (from /dev/null), output and error. Ctrl-Z stops the commands with poolrun, and
fg or bg continues them all.

A workflow file larger than 16 MiB (workflow.MaxFileSize) is refused (exit
status 2). -j is capped at the number of jobs of the workflow: no worker
starts only to wait.

Example:
  poolrun run -j 4 --report report.json examples/pipeline.yaml
`

func runWorkflow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f poolFlags
	fs := newFlagSet("run", runUsage, stderr)
	f.register(fs)
	if err := parseFlags(fs, args, stdout); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return badInputf("poolrun run: want one workflow file, got %d arguments", fs.NArg())
	}
	if err := f.check(); err != nil {
		return err
	}
	wf, err := workflow.Load(fs.Arg(0))
	if err != nil {
		return badInput(err)
	}
	f.capWorkers(len(wf.Jobs))
	// Scratch and temporary folders of poolruns and workers that were
	// killed: their artefacts are of no use.
	execflow.SweepScratch("")

	var opts execflow.Options
	s := newSession(&f, stderr)
	// A worker that dies has its scratch folder removed at once.
	p := engine.New(append(s.options(), execflow.ScratchCleanup(opts))...)
	jobs, err := execflow.Queue(p, wf, opts)
	if err != nil {
		return badInput(err)
	}
	defer suspendWithWork(p)()
	if handles, err := execflow.ItemHandles(wf, opts); err == nil {
		var items []cachepool.Handle
		for _, h := range handles {
			items = append(items, h)
		}
		if f := openNames(items); f != nil {
			defer f.Close()
		}
	}
	wall, runErr := s.run(ctx, p)
	if runErr != nil {
		printFailures(stderr, wf, jobs)
	}
	return s.finish(stdout, "run "+fs.Arg(0), p, summariseRunErr(runErr), wall, nil)
}

// suspendWithWork makes a stop from the terminal (Ctrl-Z: SIGTSTP) stop
// the whole run, which the terminal's signal does not reach, and returns
// the function that ends this: on SIGTSTP every process of the run's work
// is stopped ([execflow.Suspend]), then poolrun stops itself (SIGSTOP);
// once poolrun is continued (SIGCONT: a shell's fg or bg), so is the work.
func suspendWithWork(p *engine.Pool) (stop func()) {
	tstp := make(chan os.Signal, 1)
	cont := make(chan os.Signal, 1)
	signal.Notify(tstp, syscall.SIGTSTP)
	signal.Notify(cont, syscall.SIGCONT)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-tstp:
			case <-done:
				return
			}
			select {
			case <-cont: // an earlier one
			default:
			}
			resume := execflow.Suspend(p)
			// The stop may reach another thread first, and this one only
			// later: the SIGCONT that ends it says this process ran again.
			syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			select {
			case <-cont:
			case <-done:
			}
			resume()
		}
	}()
	return func() {
		signal.Stop(tstp)
		signal.Stop(cont)
		close(done)
		<-finished
	}
}

// printFailures prints, for each failed job, its command's exit status and
// the end of its standard error, and for each Aborted job why its worker
// died; either way the line names the job id and where it comes from.
func printFailures(w io.Writer, wf *workflow.Workflow, jobs map[string]*engine.Job[execflow.Result]) {
	for _, j := range wf.Jobs {
		job := jobs[j.ID]
		if job == nil {
			continue
		}
		st := job.Status()
		if st != engine.Failed && st != engine.Aborted {
			continue
		}
		_, err := job.Result()
		msg := err.Error()
		var te *engine.TimeoutError
		switch {
		case st == engine.Aborted:
			msg = "aborted: " + msg
		case errors.As(err, &te):
			// What the command said when it was stopped adds nothing.
			msg = fmt.Sprintf("job %q (%s:%d): timed out after %v", j.ID, wf.File, j.Line, te.Timeout)
			if te.Killed {
				msg += fmt.Sprintf(" and did not stop within %v more: its worker was killed", te.Grace)
			}
		}
		// A command's error names its job already: job "ID" (FILE:LINE): ...
		if !strings.Contains(msg, fmt.Sprintf("job %q", j.ID)) {
			msg = fmt.Sprintf("job %q (%s:%d): %s", j.ID, wf.File, j.Line, msg)
		}
		fmt.Fprintf(w, "poolrun: %s\n", indent(msg))
	}
}

func indent(s string) string { return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") }

// summariseRunErr shortens Run's error for the last line: how many jobs
// failed (the details were printed above and are in the report).
func summariseRunErr(err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	var je *engine.JobError
	n := 0
	for _, e := range unjoin(err) {
		if errors.As(e, &je) {
			n++
		}
	}
	if n == 0 {
		return err
	}
	return fmt.Errorf("poolrun run: %d job(s) failed", n)
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
