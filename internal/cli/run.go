package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/human"
	"github.com/poolrun/poolrun/internal/workflow"
	"github.com/spf13/pflag"
)

const runUsage = `Usage: poolrun run [flags] [FILE] [TARGET...]

Runs the jobs of a YAML workflow FILE (poolrun.yaml if none is given) on a
pool of -j workers, goroutines of poolrun that start the commands and wait
for them. A job runs a shell command (sh -c; plain words without shell
syntax, such as "cc -c a.c", are executed directly, as make does) once the
jobs it comes after have succeeded. With TARGETs (job ids, or globs over
them as after: takes them; or, for a TARGET that is no job's id, a file,
a folder or a glob of files that jobs' outputs make, relative to the
workflow's folder: counts/b.txt), it runs those jobs and every job they
need, and nothing else.
`

const runDetails = `An item is an artefact (a file or folder) that its own command builds,
once per worker that needs it, in that worker's private scratch folder
(on a memory file system where there is one); a job that needs item
"ref" finds its path in $POOLRUN_ITEM_REF. The artefact is deleted the
moment no unfinished job needs the item any more.

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

Targets, as make's: poolrun run wf.yaml merge runs merge and every job it
runs after, directly or not (after: and inferred, below); -n, --dag and
--list take targets too. Without FILE, poolrun run reads poolrun.yaml in
the current folder (after -C), as make reads its Makefile: poolrun run
merge does, when there is no file merge (the first argument is FILE when
it exists or ends in .yaml or .yml); with no poolrun.yaml either, it says
"no workflow file given, and no poolrun.yaml here" (exit status 2). A
target that matches no job is an error that names the closest ids (exit
status 2). The state file keeps what it knew of the jobs a run of targets
leaves out.

Variables: vars: at the top of the file gives values to ${name} wherever
foreach variables go (id, run, after, needs, inputs, outputs, item
commands, and foreach ranges and globs, and workdir:); --set NAME=VALUE
(repeatable) overrides one, or gives one that the file uses without a
vars: entry. A --set without =, or of a name the file neither declares
nor uses, is an error; so is a foreach variable with a name of vars:. In
run commands a value is text, never shell code: poolrun quotes it for
the shell where it stands, bare (${f}), in "${f}" or in '${f}', so that
the command gets exactly its bytes, spaces, quotes and $ included (a
file named $(rm x) stays a name). ${name:raw} pastes a value as shell
text, for the rare case. A value with shell characters where poolrun
cannot quote it (inside ` + "`...`" + `, or after a << here-document) is
an error (FILE:LINE); so is a NUL byte in a command.

  vars:
    ref: hg38
  jobs:
    - id: count-${f.stem}
      foreach: {f: "data/*.csv"}  # one job per file: a glob
      run: ./count --ref ${ref} ${f} > out/${f.stem}.n
      inputs: ["${f}"]
      outputs: ["out/${f.stem}.n"]

A foreach value with * ? or [ is a glob of files, relative to the working
folder, read before anything runs (a glob that matches nothing is an
error, FILE:LINE); ${f} is the path, ${f.stem} the base name without its
last extension, ${f.name} the base name, ${f.dir} the folder.

The commands run in the workflow's working folder: the workflow file's
folder, or workdir: DIR (relative to that folder, or absolute), whatever
the current folder; inputs:, outputs: and foreach globs are relative to
it too. -C DIR changes to DIR before anything else, as make -C does (FILE,
--report, --log-dir are then relative to DIR).

The workflow is checked before anything runs: an unknown field, a
duplicate id, an unknown dependency or item, a dependency cycle, a bad
foreach or a YAML error is reported as FILE:LINE: what is wrong (exit
status 2), every mistake of the file on a line of its own (the first 20,
then "... and N more"). A command that exits non-zero fails its job
(exit status 1 at the end), with its exit status, its peak memory (where
it used more than poolrun) and the last lines of its standard error in
the messages and the report; a job whose worker died (a worker joined
with --listen) is Aborted, and named the same way. A job that runs
longer than its timeout: (or --timeout, for jobs without one) fails; its
command gets SIGTERM, then SIGKILL. Commands inherit poolrun's
environment (less its POOLRUN_* variables), plus $POOLRUN_JOB (the job
id), $POOLRUN_THREADS (its threads:, 1 without), $POOLRUN_ATTEMPT (1,
then 2 on the first retry, ...) and $POOLRUN_RES_NAME for each of its
resources: (NAME in upper case: $POOLRUN_RES_GPU), and no open file but
standard input (from /dev/null), output and error. Ctrl-Z stops the
commands with poolrun, and fg or bg continues them all. What a command
starts in a session of its own (setsid) is killed (SIGKILL) once the
command has ended: at once, or at most a second later, and at the latest
when poolrun ends. Should poolrun be killed (SIGKILL), a janitor process
it started kills what its commands left running and removes its scratch
folders, its lock file and its join file; a janitor that is killed is
replaced at once, and poolrun says so.

After a job fails, no other job starts, as in make: the jobs running
finish (their outputs kept, or removed if they fail, as ever), the jobs
not started end cancelled, and the run ends with exit status 1 (the next
run starts them; --fail-fast, the same, is the default). -k
(--keep-going) goes on starting every job that does not need the failed
one, directly or not. A job with a retry left has not failed yet: the
run goes on while it is run again. An Aborted job (its worker died) is a
failure as a failed one is.

A job with retries: N (or every job, with --retries N) is run again, up to
N more times, when its command fails, passes its timeout (which bounds
each run) or its worker dies, after retry_delay: if it has one; each new
run is announced on standard error, the report lists every run with its
exit status and the end of its standard error, and the messages at the
end say "failed after 3 attempts". Its outputs are removed before each
new run. A run is never retried once poolrun is interrupted (Ctrl-C) or
another job has failed (without -k).

threads: N makes a job count N against -j: poolrun starts a job only when
the threads of the jobs running with it stay within -j, and their mem:
within --mem SIZE (no limit without it). A job that does not fit waits,
and so do the jobs after it (the oldest ready job starts first, and a
large one is never passed over for ever); a job that asks for more than
-j or --mem runs alone (poolrun says so). Sizes are powers of 1024: 512M,
2G, 1.5GiB. resources: {gpu: 1, licence: 2} counts named resources the
same way, each against its limit: --resources gpu=2,licence=1 (or the
flag given again), or the workflow's own resources: {gpu: 2} (the flag
wins, name by name). A resource with a limit nowhere is not counted (as
in Snakemake): give one to bound it. With --listen, threads:, mem: and
resources: are not counted (they bound one host, and the jobs run on
several).

What the commands print reaches poolrun's standard output and error in
whole lines, so that the lines of jobs that run at once never mix; on a
terminal they show above the progress bar. --tag prefixes each line with
[JOB-ID] (the default when jobs run in parallel and standard error is a
terminal; --tag=false turns it off). --log-dir DIR writes each job's
standard output and error to DIR/JOB-ID.out and DIR/JOB-ID.err instead
(emptied when the job starts; a job id with a / in it has %2F there), and
the end of the run says where they are. With --listen, a remote job's
output reaches this poolrun's standard output and error (tagged, or
above the progress bar) as a local job's does, not the terminal of
poolrun worker; with --log-dir, workers on other hosts write the logs
themselves, so DIR must be on storage that every host sees at the same
path, as the working folder (a worker that cannot write in it is
refused when it joins). -v (--verbose) prints
each command as it starts, each of its lines after [JOB-ID], on standard
output, before what it prints (with --log-dir too): make echoes its
commands there, so that poolrun run -v wf.yaml > log holds each command
and then its output.

Like make, a run skips the jobs whose work is done. A job may declare
inputs: and outputs:, paths or globs relative to the working folder
(${var} expands in them). A job whose input is another job's output runs
after it, without after: (an input path equal to an output path, or an
input glob that matches output paths; output globs are matched with
nothing: write after: for them); --dag draws those edges dashed, and a
cycle through them is an error, FILE:LINE, as one through after: is:

  jobs:
    - id: clean
      run: ./clean raw.csv > clean.csv
      inputs: [raw.csv]
      outputs: [clean.csv]
    - id: plot-${k}
      foreach: {k: [a, b]}
      run: ./plot ${k} clean.csv > plot-${k}.png
      inputs: [clean.csv]             # so it runs after clean
      outputs: ["plot-${k}.png"]

A job is skipped (status "skipped"; the jobs after it go on as after a
success) when a run of its command made its outputs, they all exist, and
none is older than its inputs or than the outputs of the jobs it runs
after: poolrun keeps, in a state file beside the workflow
(.FILE.poolrun-state), each job's command hash and the files its output
globs matched that it made. A job's outputs are those files and its
output paths, never whatever else a glob matches: a hand-written file
beside them neither makes the job look done nor is removed. Otherwise it
runs: it never ran here ("output X exists, but no run of this job is
recorded as making it"), an output is missing, an input is missing or
newer, its command changed, or a job it runs after runs. An input glob
that matches another set of files than when the job last ran reruns it
too ("input data/*.csv matches data/b.csv, which it did not when the job
last ran"), whatever the files' times. An input that does not exist and
that no job makes (no output names it, and the job runs after no job
without outputs) stops the run before anything runs, FILE:LINE, exit
status 2. A job without outputs always runs. This is decided before
anything runs, in the order of the jobs. --force runs every job anyway
(so does --force '*', ids with a / included), --force JOB-GLOB
(repeatable, or comma-separated) those whose ids match.

Outputs must lie inside the working folder, also once symbolic links are
followed: one that resolves elsewhere (../x, /x, ${d}/x with an empty d,
or through a link), or that could match the workflow file, its state
file or a .git folder, is refused before anything runs (FILE:LINE, exit
status 2); so is workdir: /. So are outputs that could name one file for
two jobs (out/*.txt and out/b.txt), an output glob that could match an
input no job makes (a source; unless the job that reads it runs after
the glob's), and outputs that could match the job logs of --log-dir,
--report or --join-file. A pattern matches names that begin with a dot
only where it says so (.*). When a job fails or is interrupted, poolrun
removes what its command wrote of its outputs (make's .DELETE_ON_ERROR):
its output paths where it created or changed them, the files its globs
match that it created, or made before and changed, and the folders it
created; never a file that was there before and is not the job's,
whatever happened to it. The message and the report name what was
removed (of a job interrupted on a worker of another host, --listen,
they say only that it was interrupted: its run ends unheard). Before a
job's command runs, its last outputs (its output paths and the files it
made under its globs, unless its inputs name them too) are moved aside
as .NAME.poolrun-aside in their folders, and the folders of its outputs
are made: the command starts from nothing, as a first run does. They are
dropped when it succeeds (a folder output then gets the time of its end,
so that it settles), and put back as they were when it fails or is
interrupted; a run cut off leaves them aside for the job's next run,
which puts them back first. A command that exits 0 leaving an output as
it was (cp -p) succeeds; one that exits 0 with an output missing, or a
glob matching none of its files, fails. Before the first job runs, the
state file records the jobs about to run as begun, and a job as done
only once it has succeeded: a run that is cut off (kill -9, a power cut)
leaves no job looking done, and the next run runs them again
("incomplete (the last run was cut off)"), as it does a job that failed.
A job whose worker died keeps what it wrote until then.

One run of a workflow at a time: a second poolrun run of the same file,
by the same name or another (a symbolic or hard link), refuses, naming
the first one's pid, or with --wait waits for it to end. The locks (of
the file itself, and .FILE.poolrun-lock, removed at the end) die with
their holder.

With --listen, workers on other hosts (poolrun worker --join-file) run
commands too, in the same working folder, where their outputs land: it
and the workflow file's folder must be on storage that every host sees, at
the same path, and a worker that cannot write in them is refused when it
joins. Items stay in each worker's scratch folder, on its own host.
-n (--dry-run) prints, in order, each job that would run with "run" and
why, then how many are up to date ("2 to run, 12 up to date"); with -v,
each job with "run" or "skip" and why ("2 to run, 12 to skip"); it runs
nothing and writes nothing. --dag prints the job graph in Graphviz dot
on standard output, jobs filled orange (run) or grey (skip), dependencies
inferred from files dashed, and runs nothing:
  poolrun run --dag wf.yaml | dot -Tsvg > wf.svg
--list prints the entries of the workflow, one a line in file order: the
id as written (align-${i}), FILE:LINE, how many jobs it gives, and its
desc: if it has one; --list-ids the ids of the jobs, one a line (which
shell completion uses: see poolrun help completion). Both run nothing.

FILE must be a regular file of at most 16 MiB (workflow.MaxFileSize): a
pipe (poolrun run <(gen)), a device or a folder is refused at once, as
is a larger file (exit status 2). --report and --join-file replace only
a regular file of their own: one that is a device, a FIFO, a folder or a
symbolic link, or FILE or its state or lock file by any name (./FILE, a
hard link), is refused before anything runs (exit status 2).

-j is capped at the number of jobs that will run: no worker starts only
to wait (none when every job is skipped).

The end of a run is the workflow's, on standard error (standard output
is the commands'): with items, their figures and the cache's (and with
workers from other hosts, a table of the workers); in a run of 1 s or
more, the 3 slowest jobs; the largest command's peak RSS, where it used
more than poolrun; the jobs cancelled and interrupted (the first 10, then
"and N more"); a line per failed job with its exit status, or why it
failed (the first 10); then how many jobs succeeded, were skipped (up to
date), failed, were interrupted or cancelled:

  slowest: align-2 9.8s, align-1 9.1s, split 2.3s
  cancelled: merge
  failed: align-3 (wf.yaml:6): exit status 2
  5 jobs: 3 succeeded, 1 failed, 1 cancelled; wall time 12.4s
  poolrun run: 1 job failed: align-3 (exit status 2)

The last line of a run that failed names the failed jobs (the first 3)
with why; --quiet leaves out all but the messages and that line.

--force takes the argument after it as its pattern unless that is the
workflow file (the only argument left, or, before the file, a name ending
in .yaml or .yml); write --force=JOB-GLOB to be sure.

Example:
  poolrun run -j 4 --report report.json examples/pipeline.yaml
  poolrun run -n wf.yaml            # what would run, and why
  poolrun run -k -v                 # poolrun.yaml: echo commands, keep going
  poolrun run --list wf.yaml        # its entries, with their desc:
  poolrun run examples/targets.yaml summary --set size=5000
  poolrun run -C project wf.yaml 'plot-*'
  poolrun run --log-dir logs examples/pipeline.yaml
`

// startingJanitor is a janitor (execflow.StartJanitor) that starts in a
// goroutine of its own.
type startingJanitor struct {
	done chan struct{}
	j    *execflow.Janitor
	err  error
}

func startJanitor(opts execflow.Options) *startingJanitor {
	s := &startingJanitor{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.j, s.err = execflow.StartJanitor(opts)
	}()
	return s
}

// wait waits until s has started, and returns why it could not; nil for
// no janitor.
func (s *startingJanitor) wait() error {
	if s == nil {
		return nil
	}
	<-s.done
	return s.err
}

// close dismisses s once it has started.
func (s *startingJanitor) close() {
	if s != nil && s.wait() == nil {
		s.j.Close()
	}
}

// runWorkflow is poolrun run: it parses the flags and loads the workflow,
// takes its lock, plans what to run, prepares and starts the pool, runs
// it, then saves what the run made and reports. Each step is a method of
// workflowRun; one that has done all there is to do (help, --list, -n,
// --dag) says so, and the run ends there.
func runWorkflow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	r := &workflowRun{stdout: stdout, stderr: stderr}
	defer r.close()
	if done, err := r.parse(args); done || err != nil {
		return err
	}
	if err := r.lock(ctx); err != nil {
		return err
	}
	if done, err := r.makePlan(); done || err != nil {
		return err
	}
	if err := r.prepare(); err != nil {
		return err
	}
	if err := r.listen(); err != nil {
		return err
	}
	r.startPool()
	if err := r.begin(); err != nil {
		return err
	}
	wall, runErr := r.s.run(ctx, r.p)
	return r.finish(wall, runErr)
}

// A workflowRun is the state of one poolrun run, which its steps fill in
// turn (see runWorkflow).
type workflowRun struct {
	stdout, stderr io.Writer

	// Set by parse.
	fs     *pflag.FlagSet
	f      poolFlags
	sf     stdioFlags
	inc    incrementalFlags
	wff    workflowFlags
	rf     resourceFlags // --mem, and --retries for failed commands
	lf     listFlags
	file   string // the workflow file, as named
	wf     *workflow.Workflow
	others map[string]bool // the jobs that the targets leave out

	// Set by makePlan.
	plan  *execflow.Plan
	toRun int // the jobs that run, not skipped
	slots int // threads: count against -j as given

	// Set by prepare, listen and startPool.
	opts    execflow.Options
	janitor *startingJanitor
	batch   *execflow.Batch
	s       *session
	p       *engine.Pool
	jobs    map[string]*engine.Job[execflow.Result] // read once Run has returned

	undo []func() // run by close, the last first
}

// later has close call f, before what was given it earlier, as a defer
// in runWorkflow would.
func (r *workflowRun) later(f func()) { r.undo = append(r.undo, f) }

// close undoes what the steps did, the last first: it closes the items'
// names and the listener, waits for the sweep, dismisses the janitor and
// releases the lock.
func (r *workflowRun) close() {
	for _, f := range slices.Backward(r.undo) {
		f()
	}
}

// parse parses the flags and the arguments, and loads the workflow; it is
// done after --help, --list and --ids.
func (r *workflowRun) parse(args []string) (done bool, err error) {
	fs := newFlagSet("run", runUsage, workflowFields+"\n"+runDetails)
	r.inc.register(fs)
	r.wff.register(fs)
	r.f.register(fs)
	r.sf.register(fs)
	r.rf.register(fs)
	r.lf.register(fs)
	fs.Lookup("fail-fast").Usage = failFastText
	fs.Lookup("jobs").Usage = fmt.Sprintf(runJobsText, maxWorkers)
	fs.Lookup("quiet").Usage = "print no progress and no account at the end: only the messages of failed jobs, and the last line"
	r.fs = fs
	if err := parseFlags(fs, r.inc.args(fs, args), r.stdout); err != nil {
		if errors.Is(err, errHelp) {
			return true, nil
		}
		return true, err
	}
	if err := r.checkFlags(); err != nil {
		return true, err
	}
	file, targets, err := workflowArgs(fs.Args())
	if err != nil {
		return true, err
	}
	r.file = file
	if r.wf, r.others, err = r.wff.load(file, targets); err != nil {
		return true, err
	}
	if r.lf.entries || r.lf.ids {
		return true, r.lf.write(r.stdout, r.wf)
	}
	return false, r.f.checkRunFiles(r.wf.File)
}

// checkFlags enters the folder of -C and checks the flags together.
func (r *workflowRun) checkFlags() error {
	if err := r.wff.enter(); err != nil {
		return err
	}
	// After -C: --report and --join-file are relative to its folder.
	if err := r.f.check(); err != nil {
		return err
	}
	if err := r.inc.check(r.lf); err != nil {
		return err
	}
	return r.inc.setFailFast(&r.f)
}

// lock takes the workflow's lock, unless the run only prints its plan.
// One run of a workflow at a time: two would share its state file and
// outputs. It is taken before the plan reads the state.
func (r *workflowRun) lock(ctx context.Context) error {
	if r.inc.dryRun || r.inc.dag {
		return nil
	}
	lock, err := lockWorkflow(ctx, r.wf, r.inc.wait, r.stderr)
	if err != nil {
		return err
	}
	r.later(func() { lock.Unlock() })
	return nil
}

// makePlan plans which jobs run, and sizes the pool for them; it is done
// after printing the plan (-n, --dag).
func (r *workflowRun) makePlan() (done bool, err error) {
	if r.plan, err = r.inc.plan(r.wf, r.others); err != nil {
		return true, err
	}
	switch {
	case r.inc.dryRun && r.inc.verbose:
		return true, r.plan.WriteText(r.stdout)
	case r.inc.dryRun:
		return true, writeDryRun(r.stdout, r.plan)
	case r.inc.dag:
		return true, r.plan.WriteDot(r.stdout)
	}
	r.toRun, _ = r.plan.Counts()
	r.slots = r.f.workers()
	r.f.capWorkers(r.toRun)
	if r.toRun == 0 {
		r.f.serial = true // every job is skipped: no worker to start
	}
	return false, nil
}

// prepare starts the janitor and the sweep, sets up the commands' output
// and prepares the jobs.
func (r *workflowRun) prepare() error {
	r.opts = execflow.Options{
		Plan:     r.plan,
		Dir:      r.wf.Dir, // "" (unknown) runs them in the current folder
		Retries:  r.f.retries,
		JoinFile: r.f.joinFile,
	}
	r.startHousekeeping()
	var err error
	if r.opts.Stdio, err = r.sf.stdio(r.fs, r.f.workers(), r.stderr); err != nil {
		return err
	}
	r.opts.Stdio.Echo = r.inc.verbose
	if err := checkClaims(r.wf, map[string]string{"--report": r.f.report, "--join-file": r.f.joinFile}); err != nil {
		return err
	}
	// Checked before the pool listens: a worker that joins finds the run
	// it was told of.
	if r.batch, err = execflow.Prepare(r.wf, r.opts); err != nil {
		return badInput(err)
	}
	return nil
}

// startHousekeeping starts the janitor, if any job runs, and the sweep of
// the scratch folders of killed runs, each in a goroutine of its own.
func (r *workflowRun) startHousekeeping() {
	// Nothing of the run's outlives this process, should it be killed: a
	// janitor waits for its end. It starts while the pool is made; no
	// command starts before it is there.
	if r.toRun > 0 {
		r.janitor = startJanitor(r.opts)
		r.later(r.janitor.close)
	}
	// Scratch and temporary folders of poolruns and workers that were
	// killed: their artefacts are of no use. They go while the run starts
	// (never a folder of a live poolrun's: see SweepScratch), and before
	// this returns.
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		execflow.SweepScratch("")
	}()
	r.later(func() { <-swept })
}

// listen makes the session that runs the pool and records it, and listens
// for workers that join (--listen).
func (r *workflowRun) listen() error {
	r.s = newSession(&r.f, r.stderr)
	// The commands run in this process: its workers are goroutines, which
	// wait for the commands in the network poller (no worker process
	// relays them).
	r.s.inProcess = true
	if err := r.s.listen(sharedFolders(r.wf, r.opts.Stdio.LogDir)...); err != nil {
		return err
	}
	r.later(r.s.closeListener)
	return nil
}

// startPool makes the pool and queues the jobs.
func (r *workflowRun) startPool() {
	// A worker that dies has its scratch folder removed at once; what the
	// commands print shows above the progress bar.
	popts := append(r.s.options(), execflow.ScratchCleanup(r.opts), workerOutput(r.s, r.stdout, r.stderr), r.plan.Recorder())
	r.p = engine.New(append(popts, r.rf.capacity(r.wf, r.plan, r.slots, r.f.listen != "", r.stderr)...)...)
	if len(r.wf.Items) == 0 {
		// No job needs an item: the first commands start while the
		// others are queued. (A job that needs an item is queued before
		// Run, so that the window lists the item from the start: one
		// queued later could find it freed, and build it again.)
		r.p.Go(func(context.Context) error {
			r.jobs = r.batch.Queue(r.p)
			return nil
		})
	} else {
		r.jobs = r.batch.Queue(r.p)
	}
	r.later(suspendWithWork(r.p))
	r.openNames()
}

// openNames lists the items' names for poolrun inspect while the run
// lasts.
func (r *workflowRun) openNames() {
	handles, err := execflow.ItemHandles(r.wf, r.opts)
	if err != nil {
		return
	}
	var items []cachepool.Handle
	for _, h := range handles {
		items = append(items, h)
	}
	if f := openNames(items); f != nil {
		r.later(func() { f.Close() })
	}
}

// begin waits for the janitor, and records the jobs about to run as
// begun, so that a run cut off from here on leaves none of them looking
// done.
func (r *workflowRun) begin() error {
	if err := r.janitor.wait(); err != nil {
		return err
	}
	return r.plan.Begin()
}

// finish prints the failures, saves what the run made, and ends with the
// account and the report (--report).
func (r *workflowRun) finish(wall time.Duration, runErr error) error {
	// The report's records: each job's command's end, then each job's.
	r.s.rec.NoteCommands(r.wf, r.jobs)
	ends := r.s.jobEnds(r.wf, r.jobs)
	printFailures(r.stderr, ends)
	runErr = r.save(runErr)
	// The end is the workflow's, on standard error with the messages
	// (standard output is the commands'); the cache's figures only where
	// there are items.
	r.s.summary = func(st engine.Stats) {
		printRunEnd(r.stderr, ends, st, wall, r.s.rec.CommandRSSFloor(), len(r.wf.Items) > 0)
	}
	printLogDir(r.stderr, r.opts.Stdio)
	return r.s.finish(r.stdout, "run "+r.file, r.p, summariseRunErr(runErr, ends), wall, nil)
}

// save writes what the run made to the state file, for the next run, and
// returns runErr, or an error of its own if the run succeeded but the
// state could not be written. It prints why here, since an interrupted
// run's error is not printed.
func (r *workflowRun) save(runErr error) error {
	if err := r.plan.Save(r.jobs); err != nil {
		fmt.Fprintf(r.stderr, "poolrun: %v\n", indent(err.Error()))
		if runErr == nil {
			return errors.New("poolrun run: every job succeeded, but the state file could not be written")
		}
	}
	return runErr
}

// incrementalFlags are the flags of poolrun run that say which jobs run:
// --force, -k (after a failure), -n (--dry-run) and --dag; and -v, which
// says more of them.
type incrementalFlags struct {
	force     forceFlag
	keepGoing bool
	verbose   bool
	dryRun    bool
	dag       bool
	wait      bool
}

func (f *incrementalFlags) register(fs *pflag.FlagSet) {
	fs.Var(&f.force, "force", "run the jobs whose ids match `JOB-GLOB` even if their outputs are up to date (repeatable, or comma-separated; --force alone: every job)")
	fs.Lookup("force").NoOptDefVal = forceAll
	fs.BoolVarP(&f.keepGoing, "keep-going", "k", false, "after a job fails, go on starting the jobs that do not need it (by default no job starts once one has failed, as in make; the running ones finish)")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "print each command on standard output as it starts, after [JOB-ID] (as make echoes them); with -n, list the jobs it would skip too")
	fs.BoolVarP(&f.dryRun, "dry-run", "n", false, "print the jobs that would run, and why, and how many are up to date (-v lists them too); run nothing, write nothing")
	fs.BoolVar(&f.dag, "dag", false, "print the job graph in Graphviz dot, jobs coloured by what a run would do (run or skip); run nothing")
	fs.BoolVar(&f.wait, "wait", false, "if another poolrun runs this workflow, wait for it to end (by default poolrun refuses, naming its pid)")
}

// setFailFast sets pf's --fail-fast, which poolrun run has on unless
// -k is given; it refuses the two together.
func (f *incrementalFlags) setFailFast(pf *poolFlags) error {
	if f.keepGoing && pf.failFast {
		return badInputf("poolrun run: -k (--keep-going) and --fail-fast: give one of them")
	}
	pf.failFast = !f.keepGoing
	return nil
}

// failFastText is --fail-fast's text in poolrun run's help.
// runJobsText is -j's usage under poolrun run, whose workers are
// goroutines of poolrun that start the commands.
const runJobsText = "run up to `N` jobs at once (0 to %d; a job's threads: count against N), each by a worker, a goroutine of poolrun (no more workers than jobs to run; 0: as --serial)"

const failFastText = "start no job after a job has failed; the running ones finish (the default of poolrun run: see -k)"

// lockWorkflow takes the lock of wf's file (execflow.LockWorkflow). A
// folder where the lock cannot be made is no obstacle to a workflow
// without outputs, which writes nothing there.
func lockWorkflow(ctx context.Context, wf *workflow.Workflow, wait bool, stderr io.Writer) (*execflow.Lock, error) {
	lock, err := execflow.LockWorkflow(ctx, wf.File, false)
	var locked *execflow.LockedError
	if wait && errors.As(err, &locked) {
		fmt.Fprintf(stderr, "poolrun run: %s is being run by %s; waiting for it to end\n", wf.File, locked.Holder())
		lock, err = execflow.LockWorkflow(ctx, wf.File, true)
	}
	switch {
	case err == nil:
		return lock, nil
	case errors.As(err, &locked):
		return nil, fmt.Errorf("poolrun run: %w", err)
	case ctx.Err() != nil:
		return nil, err
	}
	for _, j := range wf.Jobs {
		if len(j.Outputs) > 0 {
			return nil, fmt.Errorf("poolrun run: %w (the state file is written beside the workflow)", err)
		}
	}
	return nil, nil
}

// args returns args, for fs, with each --force that is followed by its
// pattern (--force JOB-GLOB) written --force=JOB-GLOB; a --force without
// one means every job (pflag's NoOptDefVal). The argument after --force
// is its pattern when it does not start with '-', unless it is the
// workflow file: when it comes before any other argument and its name
// ends in .yaml or .yml (the targets follow the file), or when no other
// argument is left for the file, the last such argument.
func (f *incrementalFlags) args(fs *pflag.FlagSet, args []string) []string {
	var files, patterns []int // the indexes of arguments, and of those after a bare --force
scan:
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			for j := i + 1; j < len(args); j++ {
				files = append(files, j)
			}
			break scan
		case a == "-" || !strings.HasPrefix(a, "-"):
			files = append(files, i)
		case a == "--force":
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && (len(files) > 0 || !workflowName(args[i+1])) {
				patterns = append(patterns, i+1)
				i++
			}
		case strings.HasPrefix(a, "--"):
			if fl := fs.Lookup(a[2:]); fl != nil && fl.NoOptDefVal == "" {
				i++ // its value (--name=value has none to skip, and no such flag)
			}
		default: // shorthands, -nj2 or -j 2
			for k := 1; k < len(a); k++ {
				fl := fs.ShorthandLookup(a[k : k+1])
				if fl == nil || fl.NoOptDefVal != "" {
					continue
				}
				if k+1 == len(a) {
					i++ // its value is the next argument
				}
				break
			}
		}
	}
	if len(files) == 0 && len(patterns) > 0 {
		patterns = patterns[:len(patterns)-1] // the workflow file
	}
	out := slices.Clone(args)
	for _, i := range slices.Backward(patterns) {
		out = slices.Replace(out, i-1, i+1, "--force="+args[i])
	}
	return out
}

// workflowName reports whether the argument a names a workflow file
// rather than a job: its name ends in .yaml or .yml.
func workflowName(a string) bool {
	return strings.HasSuffix(a, ".yaml") || strings.HasSuffix(a, ".yml")
}

// check refuses two of -n, --dag, --list and --list-ids (l).
func (f *incrementalFlags) check(l listFlags) error {
	var given []string
	for _, g := range []struct {
		on   bool
		name string
	}{{f.dryRun, "-n (--dry-run)"}, {f.dag, "--dag"}, {l.entries, "--list"}, {l.ids, "--list-ids"}} {
		if g.on {
			given = append(given, g.name)
		}
	}
	if len(given) > 1 {
		return badInputf("poolrun run: %s: give one of them", strings.Join(given, " and "))
	}
	return nil
}

// writeDryRun writes what -n prints without -v: the jobs that would run,
// as [execflow.Plan.WriteText] writes them, and how many jobs are up to
// date, which -v lists too.
func writeDryRun(w io.Writer, plan *execflow.Plan) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, d := range plan.Decisions {
		if d.Run {
			fmt.Fprintf(tw, "run\t%s\t%s\n", d.Job.ID, d.Why())
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	run, skip := plan.Counts()
	more := ""
	if skip > 0 {
		more = " (-v lists them)"
	}
	_, err := fmt.Fprintf(w, "%d to run, %d up to date%s\n", run, skip, more)
	return err
}

// plan decides which jobs of wf a run runs: every --force pattern must be
// valid and match some job. others are the ids of the jobs of the file
// that a run of targets leaves out (execflow.PlanOptions.Others).
func (f *incrementalFlags) plan(wf *workflow.Workflow, others map[string]bool) (*execflow.Plan, error) {
	opts := execflow.PlanOptions{Others: others}
	for _, pattern := range f.force {
		jobs := wf.Jobs
		if pattern != forceAll {
			var err error
			if jobs, err = wf.Match(pattern); err != nil {
				return nil, badInputf("poolrun run: --force %s: %v", pattern, err)
			}
		}
		if len(jobs) == 0 {
			if others != nil {
				return nil, badInputf("poolrun run: --force %s: no job that the targets need matches it", pattern)
			}
			return nil, badInputf("poolrun run: --force %s: no job of %s matches it", pattern, wf.File)
		}
		if opts.Force == nil {
			opts.Force = make(map[string]bool)
		}
		for _, j := range jobs {
			opts.Force[j.ID] = true
		}
	}
	plan, err := execflow.NewPlan(wf, opts)
	if err != nil {
		return nil, badInput(err)
	}
	return plan, nil
}

// forceAll is the pattern of --force alone: every job. As a glob it
// would leave out the ids with a / in them, which * does not match.
const forceAll = "*"

// forceFlag is --force: patterns over job ids, from each --force and
// each comma-separated part of one.
type forceFlag []string

func (f *forceFlag) String() string { return strings.Join(*f, ",") }

func (f *forceFlag) Type() string { return "glob" }

func (f *forceFlag) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		if p == "" {
			return errors.New("want job ids or globs, separated by commas")
		}
		*f = append(*f, p)
	}
	return nil
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

// printFailures prints the message of each job that failed, was aborted
// or interrupted (see failureMessage), in the workflow's order.
func printFailures(w io.Writer, ends []jobEnd) {
	for _, e := range ends {
		if e.msg != "" {
			fmt.Fprintf(w, "poolrun: %s\n", indent(e.msg))
		}
	}
}

// failureMessage says why job j of wf ended with status st and err:
// for a failed job its command's exit status and the end of its standard
// error, or its timeout; for an Aborted job why its worker died, or that
// poolrun was interrupted under it. Either way it names the job id and
// where it comes from (job "ID" (FILE:LINE): ...), and ends with the line
// that names what poolrun removed of the job's outputs, if anything
// (removed, for an interrupted job: see execflow.Interrupted). attempts
// is how many times it ran.
func failureMessage(wf *workflow.Workflow, j *workflow.Job, st engine.Status, err error, removed string, attempts int) string {
	head := fmt.Sprintf("job %q (%s:%d): ", j.ID, wf.File, j.Line)
	msg := err.Error()
	var te *engine.TimeoutError
	switch {
	case st == engine.Aborted && errors.Is(err, context.Canceled):
		// The pool's "stopped: worker 1 was stopped: context canceled"
		// says no more.
		msg = head + "interrupted"
		if removed != "" {
			msg += "\n" + removed
		}
		return msg // of its run cut off, not of those before
	case st == engine.Aborted:
		msg = "aborted: " + msg
	case errors.As(err, &te):
		// What the command said when it was stopped adds nothing; what
		// poolrun removed does.
		msg = fmt.Sprintf("%stimed out after %v", head, te.Timeout)
		if te.Killed {
			msg += fmt.Sprintf(" and did not stop within %v more: its worker was killed", te.Grace)
		}
		if line := execflow.RemovedLine(err); line != "" {
			msg += "\n" + line
		}
	}
	// A command's error names its job already: job "ID" (FILE:LINE): ...
	if !strings.Contains(msg, fmt.Sprintf("job %q", j.ID)) {
		msg = head + msg
	}
	return withAttempts(msg, head, attempts)
}

// failureLine returns the first line of msg, job j's message (see
// failureMessage), with the job named by its bare id (build (wf.yaml:3):
// exit status 2), and the reason it gives (exit status 2).
func failureLine(wf *workflow.Workflow, j *workflow.Job, msg string) (line, reason string) {
	first, _, _ := strings.Cut(msg, "\n")
	place := fmt.Sprintf(" (%s:%d): ", wf.File, j.Line)
	job := fmt.Sprintf("job %q", j.ID)
	if rest, ok := strings.CutPrefix(first, job+place); ok {
		return showID(j.ID) + place + rest, rest
	}
	// An item's command: job "ID": item "NAME" (FILE:LINE): ...
	reason = strings.TrimPrefix(first, job+": ")
	return showID(j.ID) + ": " + reason, reason
}

func indent(s string) string { return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") }

// summariseRunErr shortens Run's error for the last line: how many jobs
// failed, and the first of them, each with its reason (the details were
// printed above and are in the report).
func summariseRunErr(err error, ends []jobEnd) error {
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
	var named []string
	for _, e := range ends {
		if e.failed() {
			named = append(named, fmt.Sprintf("%s (%s)", showID(e.id), human.Clip(e.reason, 60)))
		}
	}
	if len(named) == 0 {
		return fmt.Errorf("poolrun run: %d job%s failed", n, human.Plural(n))
	}
	return fmt.Errorf("poolrun run: %d job%s failed: %s", len(named), human.Plural(len(named)), listSome(named, verdictNames))
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// sharedFolders are the folders of a run that remote workers write in,
// absolute: the workflow's working folder (where the commands run, and
// against which inputs: and outputs: are read), the workflow file's folder
// (where the state file is) and the log folder of --log-dir (logDir,
// absolute, or ""), where the commands write their output; each once.
func sharedFolders(wf *workflow.Workflow, logDir string) []string {
	var dirs []string
	add := func(d string) {
		if d != "" && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	add(wf.Dir)
	if d, err := filepath.Abs(filepath.Dir(wf.File)); err == nil {
		add(d)
	}
	add(logDir)
	return dirs
}
