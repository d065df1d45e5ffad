package execflow

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/workflow"
)

// funcName is the name under which the function that runs a workflow job's
// command is registered with the engine: the Func of every job [Queue]
// queues, in events and errors.
const funcName = "poolrun.exec"

// The environment variables that tell a job's command about the job: its
// workflow id, its threads: (1 if none) and which run of it this is (1
// for the first, 2 for the first retry, as engine.JobAttempt has it).
// Each named resource it takes has one too (workflow.ResourceEnv).
const (
	jobEnv     = "POOLRUN_JOB"
	threadsEnv = "POOLRUN_THREADS"
	attemptEnv = "POOLRUN_ATTEMPT"
)

// inPoolProcess reports whether this process is not a worker process that
// a pool started: the pool's own, whose workers (serial mode,
// engine.InProcess) are goroutines, or a worker that joined by itself.
var inPoolProcess = sync.OnceValue(func() bool {
	_, worker := os.LookupEnv(engine.WorkerEnv)
	return !worker
})

// envPrefix begins the names of poolrun's environment variables:
// [engine.WorkerEnv], jobEnv, [workflow.ItemEnv] and the item paths of
// [workflow.EnvName]. Commands inherit none of them from poolrun's
// environment; poolrun sets those a command needs ([Options.Env] may set
// others).
const envPrefix = "POOLRUN_"

// LabelID is the engine label that holds a job's workflow id, in events
// ([engine.Event].Labels) and in [engine.JobError].
const LabelID = "id"

// defaultTailLines is the number of lines of standard error kept for a
// job's result or error when [Options.TailLines] is 0.
const defaultTailLines = 20

// Options say how to run a workflow's commands. The zero Options runs them in
// the current folder with poolrun's environment.
type Options struct {
	// Dir is the working folder of the commands, job and item alike.
	// "" means the current folder. A relative Dir is taken relative to the
	// current folder when [Queue] is called.
	Dir string
	// Env holds extra environment variables, "KEY=value", on top of
	// poolrun's own environment less its POOLRUN_* variables (see
	// envPrefix); a KEY given here wins, and POOLRUN_JOB and
	// POOLRUN_ITEM* set by poolrun win over it. nil adds nothing.
	Env []string
	// Scratch is the folder in which each worker process makes its private
	// scratch folder for item artefacts. "" means [DefaultScratch]. It must
	// exist.
	Scratch string
	// TailLines is the number of lines at the end of a command's standard
	// error that are kept for its [Result] or commandError. 0 means
	// defaultTailLines; a negative number keeps none.
	TailLines int
	// Stdio says what becomes of what the jobs' commands print on their
	// standard output and error: tagged lines, or log files. The zero
	// Stdio passes it on as it comes.
	Stdio Stdio
	// Plan, if not nil, is a [Plan] of the same workflow: [Queue] queues
	// the jobs it skips with engine.Skip (they end Skipped, and need no
	// item). nil runs every job.
	Plan *Plan
	// Retries is how many more times a job whose entry has no retries
	// field is run when its command fails (exits non-zero, is killed, or
	// passes its timeout) or its worker dies; 0: never. A job with
	// retries of its own (workflow.Job.Retries) has those. See
	// "Retries" in the package documentation. It must be from 0 to
	// workflow.MaxRetries.
	Retries int
	// JoinFile is the join file of the pool's server for workers of
	// other hosts (poolrun run --listen); "" for none. Should this
	// process die, its janitor removes it ([StartJanitor]).
	JoinFile string
}

// A Result is what a job that succeeded reports.
type Result struct {
	// ExitCode is the command's exit status: always 0, since a command that
	// exits otherwise fails its job with a *commandError.
	ExitCode int
	// Stderr holds the last lines of the command's standard error (see
	// [Options.TailLines]), without the final newline; "" if it wrote none.
	Stderr string
	// Duration is the command's wall time, from its start to the end of its
	// process group, not counting the builds of the items it needs.
	Duration time.Duration
	// PeakRSS is the command's peak resident memory in bytes: that of its
	// largest process (the shell, or a process the shell waited for), as
	// wait4 reports it; 0 where unknown.
	PeakRSS int64
	// Inputs is what the job's input patterns matched when its command
	// started; the zero MatchedInputs for a job without one.
	Inputs MatchedInputs
	// Outputs holds the files the job made that its output patterns
	// match, relative to its working folder, sorted (its output paths
	// are not listed: they are its own by their declaration). The state
	// file records them as the job's.
	Outputs []string
}

// execArg is the argument of a job: everything its worker needs to know,
// since Options reach workers only this way.
type execArg struct {
	ID        string
	Run       string
	File      string
	Line      int
	Dir       string   // absolute
	Env       []string // Options.Env
	TailLines int      // resolved: >= 0
	Items     []itemParam
	// Program is the worker program a job with worker: sends its request
	// to, with Args; nil for a job with a command. Held names the items
	// of Items that the program holds (and the request lists).
	Program *programParam
	Args    []string
	Held    []string
	Stdio   Stdio    // resolved: LogDir absolute
	Outputs *outputs // the job's declared outputs; nil if none
	Globs   []string // its inputs that are patterns, as written
	Threads int      // its threads: field; 0 if none (it counts 1)
	// ResEnv holds a POOLRUN_RES_NAME=N entry for each named resource it
	// takes (workflow.ResourceEnv), in the order of the names.
	ResEnv []string
}

var execFunc = engine.Register(funcName, runJob)

// settings are Options checked and resolved, as the parent computes them
// once for a workflow.
type settings struct {
	dir     string
	env     []string
	scratch string
	tail    int
	stdio   Stdio
}

func resolve(opts Options) (settings, error) {
	var s settings
	dir := opts.Dir
	if dir == "" {
		dir = "."
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return s, fmt.Errorf("execflow: working folder %q: %w", opts.Dir, err)
	}
	if err := isDir(dir); err != nil {
		return s, fmt.Errorf("execflow: working folder: %w", err)
	}
	s.dir = dir

	for _, kv := range opts.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.IndexByte(kv, 0) >= 0 {
			return s, fmt.Errorf("execflow: environment entry %q is not KEY=value", kv)
		}
	}
	s.env = opts.Env

	root := opts.Scratch
	if root == "" {
		root = DefaultScratch()
	}
	root, err = filepath.Abs(root)
	if err != nil {
		return s, fmt.Errorf("execflow: scratch folder %q: %w", opts.Scratch, err)
	}
	if err := isDir(root); err != nil {
		return s, fmt.Errorf("execflow: scratch folder: %w", err)
	}
	s.scratch = root

	switch {
	case opts.TailLines == 0:
		s.tail = defaultTailLines
	case opts.TailLines > 0:
		s.tail = opts.TailLines
	}
	if s.stdio, err = opts.Stdio.resolve(); err != nil {
		return s, err
	}
	return s, nil
}

func isDir(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a folder", path)
	}
	return nil
}

// itemParams returns the family parameter of every item of wf, by name.
func itemParams(wf *workflow.Workflow, s settings) map[string]itemParam {
	params := make(map[string]itemParam, len(wf.Items))
	env := strings.Join(s.env, "\x00")
	for _, it := range wf.Items {
		params[it.Name] = itemParam{
			Name:      it.Name,
			Run:       it.Run,
			Worker:    it.Worker,
			File:      wf.File,
			Line:      it.Line,
			Dir:       s.dir,
			Env:       env,
			Scratch:   s.scratch,
			TailLines: s.tail,
		}
	}
	return params
}

// ItemHandles returns the cache item of every item of wf, by item name, as
// [Queue] makes them for the same opts: the handles whose keys a pool's
// window lists and whose names cachepool.Lookup returns. It fails when opts
// do ([Queue] says how).
func ItemHandles(wf *workflow.Workflow, opts Options) (map[string]cachepool.Handle, error) {
	if wf == nil {
		panic("execflow: ItemHandles with a nil workflow")
	}
	s, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	out := make(map[string]cachepool.Handle, len(wf.Items))
	for name, p := range itemParams(wf, s) {
		out[name] = items.Item(p)
	}
	return out, nil
}

// Queue queues every job of wf on p, in the order of wf.Jobs, and returns
// them by workflow id. A job runs after the jobs of its After list
// (engine.After) and needs the cache items of its Needs list (engine.Needs);
// its Timeout, if any, bounds its run time (engine.JobTimeout, which
// overrides the pool's engine.Timeout); it carries the label [LabelID] with
// its id. A job with retries (its own, or opts.Retries) is queued with
// engine.JobRetries and engine.RetryFailures (its retry_delay), and one
// with threads or mem with engine.JobResources. A job that opts.Plan
// skips is queued with engine.Skip and needs no item. A job with outputs
// has them checked after its command, and removed if it fails (see the
// package documentation).
//
// Queue checks everything before it queues anything: it fails, queueing
// nothing, when opts.Dir, the scratch folder or opts.Stdio.LogDir (if
// any) is not an existing folder, opts.Retries is out of range, an
// opts.Env entry is not KEY=value, or wf is not as [workflow.Parse] returns
// them (a nil job, two jobs with one id, a job that needs an unknown item,
// or runs after a job that is unknown or comes later in wf.Jobs), or
// opts.Plan is of another workflow. Queue panics when p or wf is nil.
//
// Queue the workflow before [engine.Pool.Run], or from a scheduler while it
// runs; the returned jobs are the pool's, with their statuses and results.
// Queue is [Prepare] and then [Batch.Queue].
func Queue(p *engine.Pool, wf *workflow.Workflow, opts Options) (map[string]*engine.Job[Result], error) {
	if p == nil {
		panic("execflow: Queue with a nil pool")
	}
	b, err := Prepare(wf, opts)
	if err != nil {
		return nil, err
	}
	return b.Queue(p), nil
}

// A Batch is the jobs of a workflow, checked and ready to be queued on a
// pool, as [Prepare] makes them.
type Batch struct {
	jobs []planned
	plan *Plan // Options.Plan
}

// planned is a job of a Batch.
type planned struct {
	arg     execArg
	after   []string
	items   []cachepool.Handle
	timeout time.Duration
	skip    bool
	// retries is how many times it is run again, set: -1 when neither
	// the job nor Options say (the pool's engine.Retries then applies to
	// its worker's death); delay the wait before each new run; cost what
	// it takes while it runs (threads, mem).
	retries int
	delay   time.Duration
	cost    engine.Resources
}

// Prepare does all that [Queue] does before it queues the first job:
// every check, with the same errors. Queue the batch with [Batch.Queue],
// as a scheduler of the pool ([engine.Pool.Go]) if the first jobs are to
// start while the others are queued. Prepare panics when wf is nil.
func Prepare(wf *workflow.Workflow, opts Options) (*Batch, error) {
	if wf == nil {
		panic("execflow: Prepare with a nil workflow")
	}
	s, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	if opts.Retries < 0 || opts.Retries > workflow.MaxRetries {
		return nil, fmt.Errorf("execflow: %d retries: want 0 to %d", opts.Retries, workflow.MaxRetries)
	}
	if opts.Plan != nil && opts.Plan.wf != wf {
		return nil, fmt.Errorf("execflow: %s: the plan is of another workflow (%s)", wf.File, opts.Plan.wf.File)
	}
	outs, err := newOutputsMaker(wf, s.dir)
	if err != nil {
		return nil, err
	}
	if err := checkLogClaims(wf, s.stdio.LogDir); err != nil {
		return nil, err
	}
	params := itemParams(wf, s)
	progs := programParams(wf, s, params)

	plan := make([]planned, 0, len(wf.Jobs))
	seen := make(map[string]bool, len(wf.Jobs))
	for _, j := range wf.Jobs {
		if j == nil {
			return nil, errors.New("execflow: workflow has a nil job")
		}
		if seen[j.ID] {
			return nil, fmt.Errorf("execflow: %s:%d: job %q: duplicate id", wf.File, j.Line, j.ID)
		}
		for _, a := range j.After {
			if !seen[a] {
				return nil, fmt.Errorf("execflow: %s:%d: job %q runs after %q, which is unknown or comes later in the workflow", wf.File, j.Line, j.ID, a)
			}
		}
		pl := planned{
			arg: execArg{
				ID: j.ID, Run: j.Run, File: wf.File, Line: j.Line,
				Dir: s.dir, Env: s.env, TailLines: s.tail, Stdio: s.stdio,
			},
			after:   j.After,
			timeout: j.Timeout,
			skip:    opts.Plan != nil && !opts.Plan.Runs(j.ID),
			retries: -1,
			delay:   j.RetryDelay,
			cost:    engine.Resources{Slots: j.Threads, Memory: j.Mem, Named: j.Resources},
		}
		pl.arg.Threads = j.Threads
		for _, name := range slices.Sorted(maps.Keys(j.Resources)) {
			pl.arg.ResEnv = append(pl.arg.ResEnv, workflow.ResourceEnv(name)+"="+strconv.FormatInt(j.Resources[name], 10))
		}
		switch {
		case j.Retries != nil:
			pl.retries = *j.Retries
		case opts.Retries > 0:
			pl.retries = opts.Retries
		}
		var made []string
		if opts.Plan != nil && opts.Plan.state != nil {
			made = opts.Plan.state.Jobs[j.ID].Made
		}
		pl.arg.Outputs = outs.of(j, made)
		pl.arg.Globs = inputPatterns(j)
		if j.Worker != "" {
			pp, ok := progs[j.Worker]
			if !ok {
				return nil, fmt.Errorf("execflow: %s:%d: job %q: no worker program %q", wf.File, j.Line, j.ID, j.Worker)
			}
			pl.arg.Program, pl.arg.Args = &pp, j.Args
			if !pl.skip {
				pl.items = append(pl.items, programs.Item(pp))
			}
		}
		for _, name := range j.Needs {
			ip, ok := params[name]
			if !ok {
				return nil, fmt.Errorf("execflow: %s:%d: job %q needs %q: no such item", wf.File, j.Line, j.ID, name)
			}
			if ip.Worker != "" && ip.Worker != j.Worker {
				return nil, fmt.Errorf("execflow: %s:%d: job %q needs %q, which worker program %q holds: it is not a job of that program", wf.File, j.Line, j.ID, name, ip.Worker)
			}
			if pl.skip {
				continue // it will not run: no item for it
			}
			pl.arg.Items = append(pl.arg.Items, ip)
			pl.items = append(pl.items, items.Item(ip))
			if ip.Worker != "" {
				pl.arg.Held = append(pl.arg.Held, name)
			}
		}
		seen[j.ID] = true
		plan = append(plan, pl)
	}

	return &Batch{jobs: plan, plan: opts.Plan}, nil
}

// Queue queues the jobs of b on p, in the order of the workflow, and
// returns them by workflow id: see [Queue]. Queue a batch once: a second
// Queue panics (it would queue every job again).
func (b *Batch) Queue(p *engine.Pool) map[string]*engine.Job[Result] {
	if p == nil {
		panic("execflow: Batch.Queue with a nil pool")
	}
	plan := b.jobs
	if plan == nil {
		panic("execflow: Batch.Queue called twice")
	}
	b.jobs = nil
	jobs := make(map[string]*engine.Job[Result], len(plan))
	for _, pl := range plan {
		jopts := []engine.JobOption{engine.Label(LabelID, pl.arg.ID)}
		if len(pl.after) > 0 {
			deps := make([]engine.Dep, len(pl.after))
			for i, a := range pl.after {
				deps[i] = jobs[a]
			}
			jopts = append(jopts, engine.After(deps...))
		}
		if len(pl.items) > 0 {
			jopts = append(jopts, engine.Needs(pl.items...))
		}
		if pl.timeout > 0 {
			jopts = append(jopts, engine.JobTimeout(pl.timeout))
		}
		if pl.skip {
			jopts = append(jopts, engine.Skip())
		}
		if pl.retries >= 0 {
			jopts = append(jopts, engine.JobRetries(pl.retries))
		}
		if pl.retries > 0 {
			jopts = append(jopts, engine.RetryFailures(pl.delay))
		}
		if pl.cost.Slots != 0 || pl.cost.Memory != 0 || len(pl.cost.Named) > 0 {
			jopts = append(jopts, engine.JobResources(pl.cost))
		}
		jobs[pl.arg.ID] = engine.Queue(p, execFunc, pl.arg, jopts...)
	}
	if b.plan != nil {
		b.plan.jobs.Store(&jobs)
	}
	return jobs
}

// runJob is the registered function: it gets the job's items and runs its
// command.
func runJob(ctx context.Context, a execArg) (Result, error) {
	var env []string
	if a.Program == nil {
		env = append(commandEnv(strings.Join(a.Env, "\x00")), jobEnv+"="+a.ID,
			threadsEnv+"="+strconv.Itoa(max(a.Threads, 1)), attemptEnv+"="+strconv.Itoa(max(engine.JobAttempt(ctx), 1)))
		env = append(env, a.ResEnv...)
	}
	for _, ip := range a.Items {
		path, err := items.Item(ip).Get(ctx)
		if err != nil {
			return Result{}, jobItemError(a, ip, err)
		}
		if ip.Worker == "" {
			env = append(env, workflow.EnvName(ip.Name)+"="+path)
		}
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("job %q (%s:%d): not started: %w", a.ID, a.File, a.Line, context.Cause(ctx))
	}
	aside, err := a.Outputs.setAside()
	if err != nil {
		return Result{}, fmt.Errorf("job %q (%s:%d): not started: %w", a.ID, a.File, a.Line, err)
	}
	before := a.Outputs.snapshot()
	matched := matchInputs(folder{Abs: a.Dir}, a.Globs)
	var out shellOutcome
	if a.Program != nil {
		out, err = sendRequest(ctx, a)
	} else {
		out, err = runShell(ctx, shellCmd{run: a.Run, dir: a.Dir, env: env, tailLines: a.TailLines, job: a.ID, stdio: a.Stdio})
	}
	res := Result{Stderr: out.tail, Duration: out.duration, PeakRSS: out.maxRSS, Inputs: matched}
	switch {
	case err != nil:
		err = fmt.Errorf("job %q (%s:%d): %w", a.ID, a.File, a.Line, err)
	case out.exitCode != 0 || out.signal != "":
		err = &commandError{
			JobID: a.ID, File: a.File, Line: a.Line,
			ExitCode: out.exitCode, Signal: out.signal, StderrTail: out.tail,
		}
		if out.maxRSS > out.floor+rssMargin(out.floor) {
			err.(*commandError).PeakRSS = out.maxRSS // more than poolrun's own: the command's
		}
	}
	// Outputs checked, or removed if the job failed.
	res.Outputs, err = finishOutputs(a, before, aside, err)
	return res, err
}

// jobItemError says why a job could not get item ip.
func jobItemError(a execArg, ip itemParam, err error) error {
	var ce *commandError
	if errors.As(err, &ce) {
		c := *ce // shared with other callers of the failed build
		c.JobID = a.ID
		return &c
	}
	var ie *itemError
	if errors.As(err, &ie) {
		return fmt.Errorf("job %q: %w", a.ID, ie)
	}
	// The cache's own errors (waiting for a build interrupted) name the
	// cache member; name the workflow's item.
	return fmt.Errorf("job %q: item %q (%s:%d): %w", a.ID, ip.Name, ip.File, ip.Line, err)
}
