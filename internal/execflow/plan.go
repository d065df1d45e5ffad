package execflow

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/workflow"
)

// This file decides, before anything runs, which jobs of a workflow run
// and which are skipped, from their inputs, outputs and state file.

// A Reason says why a [Plan] runs a job, or that it skips it.
type Reason int

const (
	// UpToDate: the job is skipped. The state file records that its
	// command made its outputs, they all exist, and none is older than
	// its inputs or than the outputs of the jobs it runs after.
	UpToDate Reason = iota
	// Forced: [PlanOptions.Force] names the job.
	Forced
	// NoOutputs: the job declares no outputs, so it always runs (a make
	// target that is not a file).
	NoOutputs
	// MissingOutput: nothing is at one of its outputs (Path), or nothing
	// matches an output pattern.
	MissingOutput
	// ChangedCommand: its command is not the one the state file says made
	// its outputs.
	ChangedCommand
	// AfterRuns: a job it runs after (After) will run.
	AfterRuns
	// MissingInput: nothing is at one of its inputs (Path).
	MissingInput
	// NewerInput: an input (Path) is newer than one of its outputs
	// (Than).
	NewerInput
	// NewerAfterOutput: an output (Path) of a job it runs after (After)
	// is newer than one of its own outputs (Than).
	NewerAfterOutput
	// Incomplete: the state file says that a run began the job and did
	// not see it end (that run was killed, or interrupted), whatever the
	// times of its outputs say.
	Incomplete
	// LastFailed: the state file says that the job's last run failed.
	LastFailed
	// NotMade: its outputs exist, but the state file does not record
	// that the job made them (Path): it never ran here, or it ran
	// before poolrun recorded what a job makes, or what matches an
	// output pattern is some other file.
	NotMade
	// InputAdded: an input pattern matches a file (Path; "" when the
	// state file does not list them all) that it did not match when
	// the job last succeeded.
	InputAdded
	// InputGone: a file (Path) that an input pattern matched when the job
	// last succeeded is gone.
	InputGone
)

var reasonNames = [...]string{"up to date", "forced", "no outputs", "missing output", "changed command", "after a job that runs", "missing input", "newer input", "newer output of a job it runs after", "incomplete", "failed last time", "not made by it", "input added", "input gone"}

// String returns a short name of the reason, as "missing output".
func (r Reason) String() string {
	if r >= 0 && int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", int(r))
}

// A Decision is what a [Plan] does with one job, and why.
type Decision struct {
	Job *workflow.Job
	// Run is false when the job is skipped (Reason is then UpToDate).
	Run    bool
	Reason Reason
	// Path is the input or output the reason is about, and Than the
	// output an input is newer than (NewerInput, NewerAfterOutput) or the
	// input pattern (InputAdded, InputGone), as messages name them: relative to the current folder as the workflow
	// file's name is, or absolute. "" where the reason has none.
	Path, Than string
	// After is the id of the job it runs after that the reason is about
	// (AfterRuns, NewerAfterOutput); "" for the others.
	After string
}

// Why says why the job runs, or that it is skipped, in a few words: "output
// out/a.txt is missing", "input a.csv is newer than output out/a.txt".
func (d Decision) Why() string {
	switch d.Reason {
	case UpToDate:
		return "up to date"
	case Forced:
		return "forced"
	case NoOutputs:
		return "no outputs declared"
	case MissingOutput:
		return "output " + d.Path + " is missing"
	case ChangedCommand:
		return "its command changed"
	case AfterRuns:
		if d.Job != nil && d.Job.Inferred[d.After] != "" {
			in := d.Job.Inferred[d.After]
			return "reads " + in + ", an output of " + d.After + ", which will run"
		}
		return "runs after " + d.After + ", which will run"
	case MissingInput:
		return "input " + d.Path + " is missing"
	case NewerInput:
		return "input " + d.Path + " is newer than output " + d.Than
	case NewerAfterOutput:
		return "output " + d.Path + " of " + d.After + " is newer than output " + d.Than
	case Incomplete:
		return "incomplete (the last run was cut off)"
	case LastFailed:
		return "it failed in the last run"
	case NotMade:
		return "output " + d.Path + " exists, but no run of this job is recorded as making it"
	case InputAdded:
		if d.Path == "" {
			return "its input patterns match other files than when it last ran"
		}
		return "input " + d.Than + " matches " + d.Path + ", which it did not when the job last ran"
	case InputGone:
		return d.Path + ", which input " + d.Than + " matched when the job last ran, is gone"
	}
	return d.Reason.String()
}

// PlanOptions say what a [Plan] runs whatever the files say.
type PlanOptions struct {
	// Force holds the ids of the jobs to run whatever their files say
	// (and so the jobs after them); [workflow.Workflow.Match] finds them
	// from patterns. nil forces none.
	Force map[string]bool
	// Others holds the ids of the jobs of the whole workflow file that
	// the plan's workflow leaves out (a run of targets:
	// [workflow.Workflow.Select]): [Plan.Save] keeps what the state file
	// says of them, as of jobs that did not run. nil names none, and
	// Save drops from the state file the jobs that the plan's workflow
	// does not have.
	Others map[string]bool
}

// A Plan says which jobs of a workflow a run would run, and why, and which
// it would skip: [NewPlan] decides it before anything runs. [Queue] with
// [Options.Plan] queues the jobs it skips with engine.Skip, and
// [Plan.Save] records in the state file what the run made.
type Plan struct {
	wf *workflow.Workflow
	// Decisions holds one decision per job, in the order of the
	// workflow's Jobs (each after the jobs it runs after).
	Decisions []Decision
	byID      map[string]int
	dir       folder
	stateFile string
	state     *state                   // as read; nil when no job declares outputs
	made      [][]fileTime             // by decision: the files of the job's outputs, as decide found them
	others    map[string]bool          // PlanOptions.Others
	rec       atomic.Pointer[recorder] // set by Begin, until Save
	// jobs are the plan's jobs on the pool, once [Batch.Queue] queued
	// them: the recorder reads what a job made from its result.
	jobs  atomic.Pointer[map[string]*engine.Job[Result]]
	begun bool
}

// NewPlan decides, for each job of wf in order, whether a run runs it:
//
//   - a job that opts.Force names runs;
//   - a job without outputs runs;
//   - a job runs if the state file says that it is not done (a run
//     began it and was cut off, or it failed) or does not record it as
//     the maker of its outputs (it never ran here), if one of its outputs
//     is missing (an output path, or a file it made that its pattern
//     matches; a pattern that matches none of its files counts as
//     missing), if the state file records another command for it than
//     its own, if a job it runs after runs, if one of its inputs is
//     missing, or if an input, or an output of a job it runs after, is
//     newer than the oldest of its outputs;
//   - otherwise it is skipped.
//
// A job's outputs are its output paths and, of the files its output
// patterns match, those the state file records as made by it
// ([Result.Outputs] of its last success): a file beside them that it did
// not make (a user's source) neither makes it up to date nor is taken
// for its output. Inputs and outputs are read relative to wf.Dir, the
// workflow's working folder (or, in a Workflow without one, the folder of
// wf.File made absolute against the current folder), and a folder counts
// by its own modification time. Symbolic links are followed. The state
// file is stateFile(wf.File), read only when some job declares outputs.
// NewPlan changes nothing on disk. It fails, naming the file, when the
// state file cannot be read or is not one (errBadState), and when wf is
// not as [workflow.Parse] returns them (a nil job, or one that runs after
// a job that is unknown or comes later); it panics when wf is nil.
func NewPlan(wf *workflow.Workflow, opts PlanOptions) (*Plan, error) {
	if wf == nil {
		panic("execflow: NewPlan with a nil workflow")
	}
	dir, err := folderOf(wf)
	if err != nil {
		return nil, err
	}
	p := &Plan{
		wf:        wf,
		Decisions: make([]Decision, len(wf.Jobs)),
		made:      make([][]fileTime, len(wf.Jobs)),
		byID:      make(map[string]int, len(wf.Jobs)),
		dir:       dir,
		stateFile: stateFile(wf.File),
		others:    opts.Others,
	}
	for _, j := range wf.Jobs {
		if j != nil && len(j.Outputs) > 0 {
			if p.state, err = readState(p.stateFile); err != nil {
				return nil, err
			}
			break
		}
	}
	files := newFileTimes(dir)
	if p.state != nil {
		files.prefetch(wf.Jobs)
	}
	if err := missingSources(wf, files); err != nil {
		return nil, err
	}
	for i, j := range wf.Jobs {
		if j == nil {
			return nil, errors.New("execflow: workflow has a nil job")
		}
		for _, a := range j.After {
			if _, ok := p.byID[a]; !ok {
				return nil, fmt.Errorf("execflow: %s:%d: job %q runs after %q, which is unknown or comes later in the workflow", wf.File, j.Line, j.ID, a)
			}
		}
		d := Decision{Job: j, Run: true}
		switch {
		case opts.Force[j.ID]:
			d.Reason = Forced
		case len(j.Outputs) == 0:
			d.Reason = NoOutputs
		default:
			p.made[i] = p.decide(&d, files)
		}
		p.Decisions[i] = d
		p.byID[j.ID] = i
	}
	return p, nil
}

// maxMissing bounds the missing sources that NewPlan's error names.
const maxMissing = 20

// missingSources returns an error that names each job's sources
// (workflow.Job.Sources) that do not exist, unless the job runs after a
// job without outputs (which may make anything), the first maxMissing
// of them on a line each, or nil when there are none.
func missingSources(wf *workflow.Workflow, files *fileTimes) error {
	var noOutputs map[string]bool
	var lines []string
	more := 0
	for _, j := range wf.Jobs {
		if j == nil || len(j.Sources) == 0 {
			continue
		}
		if noOutputs == nil {
			noOutputs = make(map[string]bool)
			for _, k := range wf.Jobs {
				if k != nil && len(k.Outputs) == 0 {
					noOutputs[k.ID] = true
				}
			}
		}
		if slices.ContainsFunc(j.After, func(a string) bool { return noOutputs[a] }) {
			continue
		}
		for _, in := range j.Sources {
			if len(files.of(in)) > 0 {
				continue
			}
			if len(lines) == maxMissing {
				more++
				continue
			}
			lines = append(lines, fmt.Sprintf("%s:%d: job %q: input %s: %v", wf.File, j.Line, j.ID, files.dir.showAs(in), errNoSource))
		}
	}
	if len(lines) == 0 {
		return nil
	}
	if more > 0 {
		lines = append(lines, fmt.Sprintf("... and %d more", more))
	}
	errs := make([]error, len(lines))
	for i, l := range lines {
		errs[i] = &sourceError{l}
	}
	return errors.Join(errs...)
}

// sourceError is one line of missingSources' error.
type sourceError struct{ msg string }

func (e *sourceError) Error() string { return e.msg }
func (e *sourceError) Unwrap() error { return errNoSource }

// decide decides d for a job with outputs that is not forced, and
// returns the files of its outputs that it found (all of them, when it
// skips the job).
func (p *Plan) decide(d *Decision, files *fileTimes) []fileTime {
	j := d.Job
	rec, known := p.state.Jobs[j.ID]
	switch rec.Status {
	case statusStarted:
		d.Reason = Incomplete
		return nil
	case statusFailed:
		d.Reason = LastFailed
		return nil
	}
	// The job's files, and the oldest of them: every input must be older.
	var mine []fileTime
	var oldest fileTime
	for _, o := range j.Outputs {
		found, ok := p.outputFiles(o, rec, known, files)
		if !ok {
			d.Reason, d.Path = NotMade, found[0].shown
			return nil
		}
		if len(found) == 0 {
			d.Reason, d.Path = MissingOutput, p.dir.showAs(o)
			if workflow.IsPattern(o) {
				// One the job made, gone; or none at all.
				for _, f := range rec.Made {
					if abs := p.dir.path(f); workflow.Matches(p.dir.pattern(o), abs) {
						if _, ok := stampOf(abs); !ok {
							d.Path = p.dir.showMatch(o, abs)
							break
						}
					}
				}
			}
			return nil
		}
		for _, f := range found {
			if oldest.shown == "" || f.mtime.Before(oldest.mtime) {
				oldest = f
			}
		}
		mine = append(mine, found...)
	}
	if rec.Command != commandHash(jobCommand(p.wf, j)) {
		d.Reason = ChangedCommand
		return nil
	}
	for _, a := range j.After {
		if p.Decisions[p.byID[a]].Run {
			d.Reason, d.After = AfterRuns, a
			return nil
		}
	}
	for _, in := range j.Inputs {
		found := files.of(in)
		if len(found) == 0 && !workflow.IsPattern(in) {
			d.Reason, d.Path = MissingInput, p.dir.showAs(in)
			return nil
		}
		for _, f := range found {
			if f.mtime.After(oldest.mtime) {
				d.Reason, d.Path, d.Than = NewerInput, f.shown, oldest.shown
				return nil
			}
		}
	}
	if globs := inputPatterns(j); len(globs) > 0 {
		if f, added, differ := rec.Inputs.changed(matchInputs(p.dir, globs)); differ {
			d.Reason = InputAdded
			if !added && f != "" {
				d.Reason = InputGone
			}
			if f != "" {
				abs := p.dir.path(f)
				for _, g := range globs {
					if workflow.Matches(p.dir.pattern(g), abs) {
						d.Path, d.Than = p.dir.showMatch(g, abs), p.dir.showAs(g)
						break
					}
				}
			}
			return nil
		}
	}
	for _, a := range j.After {
		for _, f := range p.made[p.byID[a]] {
			if f.mtime.After(oldest.mtime) {
				d.Reason, d.Path, d.Than, d.After = NewerAfterOutput, f.shown, oldest.shown, a
				return nil
			}
		}
	}
	d.Run, d.Reason = false, UpToDate
	return mine
}

// outputFiles returns the files of the job's output o, as the state file
// records them (rec, if known): an output path, if it exists; the files
// that the pattern o matches and rec lists as made by the job, where they
// exist. It returns false, with the first file there is, when files are
// there that rec does not record as the job's: o is a path and the job
// is not known, or o is a pattern that matches files and none of the
// job's.
func (p *Plan) outputFiles(o string, rec jobState, known bool, files *fileTimes) ([]fileTime, bool) {
	there := files.of(o)
	if !workflow.IsPattern(o) {
		if len(there) > 0 && !known {
			return there, false
		}
		return there, true
	}
	var mine []fileTime
	made := false
	pattern := p.dir.pattern(o)
	for _, f := range rec.Made {
		abs := p.dir.path(f)
		if !workflow.Matches(pattern, abs) {
			continue
		}
		made = true
		if st, ok := stampOf(abs); ok {
			mine = append(mine, fileTime{p.dir.showMatch(o, abs), st.mtime})
		} else {
			return nil, true // missing
		}
	}
	if !made && len(there) > 0 {
		return there, false
	}
	return mine, true
}

// Runs reports whether the plan runs the job with workflow id id (false
// for an id it does not know).
func (p *Plan) Runs(id string) bool {
	i, ok := p.byID[id]
	return ok && p.Decisions[i].Run
}

// Counts returns the number of jobs the plan runs and skips.
func (p *Plan) Counts() (run, skip int) {
	for _, d := range p.Decisions {
		if d.Run {
			run++
		} else {
			skip++
		}
	}
	return run, skip
}

// fileTimes finds and remembers the modification times of the files that
// inputs and outputs stand for.
type fileTimes struct {
	dir   folder
	known map[string][]fileTime // by input or output as written
	// missing holds folders that do not exist (absolute): nothing is in
	// them, and a path in one needs no stat of its own. A plan of a
	// workflow that never ran looks at each output folder once.
	missing map[string]bool
}

// fileTime is a file or folder and its modification time.
type fileTime struct {
	shown string // as messages name it
	mtime time.Time
}

func newFileTimes(dir folder) *fileTimes {
	return &fileTimes{dir: dir, known: make(map[string][]fileTime), missing: make(map[string]bool)}
}

// prefetch stats the plain inputs and outputs of jobs that have outputs
// at once, in a few goroutines, so that the plan, which decides in order,
// finds them known: each path is still looked at once.
func (t *fileTimes) prefetch(jobs []*workflow.Job) {
	type look struct {
		p, abs string
		got    []fileTime
	}
	var looks []look
	add := func(p string) {
		if workflow.IsPattern(p) {
			return
		}
		if _, ok := t.known[p]; ok {
			return
		}
		t.known[p] = nil // a placeholder: listed once
		if abs := t.dir.path(p); !t.inMissing(abs) {
			looks = append(looks, look{p: p, abs: abs})
		}
	}
	for _, j := range jobs {
		if j == nil || len(j.Outputs) == 0 {
			continue
		}
		for _, p := range j.Inputs {
			add(p)
		}
		for _, p := range j.Outputs {
			add(p)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), 4, len(looks)/256+1)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(looks); i += workers {
				looks[i].got = t.stat(looks[i].p, looks[i].abs)
			}
		})
	}
	wg.Wait()
	for _, l := range looks {
		t.known[l.p] = l.got
	}
}

// stat returns what the plain path p, at abs, stands for: itself, with
// its modification time, or nothing where there is nothing (a missing
// path, a link to nothing). It reads no field t changes: prefetch calls
// it from several goroutines.
func (t *fileTimes) stat(p, abs string) []fileTime {
	if st, ok := stampOf(abs); ok {
		return []fileTime{{t.dir.showMatch(p, abs), st.mtime}}
	}
	return nil
}

// inMissing reports whether abs lies in a folder that does not exist, as
// a stat of the folder says once (of the working folder's own and the
// folders above them, only the first is looked at).
func (t *fileTimes) inMissing(abs string) bool {
	dir := filepath.Dir(abs)
	if dir == t.dir.Abs || dir == abs {
		return false
	}
	gone, known := t.missing[dir]
	if !known {
		_, err := os.Stat(dir)
		gone = errors.Is(err, fs.ErrNotExist)
		t.missing[dir] = gone
	}
	return gone
}

// of returns the files and folders that p, an input or output as written,
// stands for, with their modification times; none if there are none.
func (t *fileTimes) of(p string) []fileTime {
	if got, ok := t.known[p]; ok {
		return got
	}
	var got []fileTime
	if !workflow.IsPattern(p) {
		// One stat, which follows links: a path that is missing, or a
		// link to nothing, stands for nothing.
		if abs := t.dir.path(p); !t.inMissing(abs) {
			got = t.stat(p, abs)
		}
	} else {
		for _, abs := range t.dir.expand(p) {
			if st, ok := stampOf(abs); ok {
				got = append(got, fileTime{t.dir.showMatch(p, abs), st.mtime})
			}
		}
	}
	t.known[p] = got
	return got
}
