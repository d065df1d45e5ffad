package execflow

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/poolrun/poolrun/internal/workflow"
)

// This file decides, before anything runs, which jobs of a workflow run
// and which are skipped, from their inputs, outputs and state file.

// A Reason says why a [Plan] runs a job, or that it skips it.
type Reason int

const (
	// UpToDate: the job is skipped. Its outputs all exist, none is older
	// than its inputs or than the outputs of the jobs it runs after, and
	// its command is the one that made them (or the state file does not
	// know the job).
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
)

var reasonNames = [...]string{"up to date", "forced", "no outputs", "missing output", "changed command", "after a job that runs", "missing input", "newer input", "newer output of a job it runs after", "incomplete", "failed last time"}

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
	// output an input is newer than (NewerInput, NewerAfterOutput), as
	// messages name them: relative to the current folder as the workflow
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
	others    map[string]bool          // PlanOptions.Others
	rec       atomic.Pointer[recorder] // set by Begin, until Save
	begun     bool
}

// NewPlan decides, for each job of wf in order, whether a run runs it:
//
//   - a job that opts.Force names runs;
//   - a job without outputs runs;
//   - a job runs if the state file says that it is not done (a run
//     began it and was cut off, or it failed), if one of its outputs is
//     missing (a pattern that matches nothing counts as missing), if the
//     state file records another command for it than its own, if a job it
//     runs after runs, if one of its inputs is missing, or if an input, or
//     an output of a job it runs after, is newer than the oldest of its
//     outputs;
//   - otherwise it is skipped.
//
// Inputs and outputs are read relative to wf.Dir, the workflow's working
// folder (or, in a Workflow without one, the folder of wf.File made
// absolute against the current folder), and a folder counts by its own
// modification time. Symbolic links are followed. The state file is
// stateFile(wf.File), read only when some job declares outputs; a job
// it does not know is judged by the times of its files alone. NewPlan
// changes nothing on disk. It fails, naming the file, when the state file
// cannot be read or is not one (errBadState), and when wf is not as
// [workflow.Parse] returns them (a nil job, or one that runs after a job
// that is unknown or comes later); it panics when wf is nil.
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
			p.decide(&d, files)
		}
		p.Decisions[i] = d
		p.byID[j.ID] = i
	}
	return p, nil
}

// decide decides d for a job with outputs that is not forced.
func (p *Plan) decide(d *Decision, files *fileTimes) {
	j := d.Job
	switch p.state.Jobs[j.ID].Status {
	case statusStarted:
		d.Reason = Incomplete
		return
	case statusFailed:
		d.Reason = LastFailed
		return
	}
	// The oldest output: every input must be older.
	var oldest fileTime
	for _, o := range j.Outputs {
		found := files.of(o)
		if len(found) == 0 {
			d.Reason, d.Path = MissingOutput, p.dir.showAs(o)
			return
		}
		for _, f := range found {
			if oldest.shown == "" || f.mtime.Before(oldest.mtime) {
				oldest = f
			}
		}
	}
	if rec, ok := p.state.Jobs[j.ID]; ok && rec.Command != commandHash(j.Run) {
		d.Reason = ChangedCommand
		return
	}
	for _, a := range j.After {
		if p.Decisions[p.byID[a]].Run {
			d.Reason, d.After = AfterRuns, a
			return
		}
	}
	for _, in := range j.Inputs {
		found := files.of(in)
		if len(found) == 0 && !isPattern(in) {
			d.Reason, d.Path = MissingInput, p.dir.showAs(in)
			return
		}
		for _, f := range found {
			if f.mtime.After(oldest.mtime) {
				d.Reason, d.Path, d.Than = NewerInput, f.shown, oldest.shown
				return
			}
		}
	}
	for _, a := range j.After {
		for _, o := range p.Decisions[p.byID[a]].Job.Outputs {
			for _, f := range files.of(o) {
				if f.mtime.After(oldest.mtime) {
					d.Reason, d.Path, d.Than, d.After = NewerAfterOutput, f.shown, oldest.shown, a
					return
				}
			}
		}
	}
	d.Run, d.Reason = false, UpToDate
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
}

// fileTime is a file or folder and its modification time.
type fileTime struct {
	shown string // as messages name it
	mtime time.Time
}

func newFileTimes(dir folder) *fileTimes {
	return &fileTimes{dir: dir, known: make(map[string][]fileTime)}
}

// of returns the files and folders that p, an input or output as written,
// stands for, with their modification times; none if there are none.
func (t *fileTimes) of(p string) []fileTime {
	if got, ok := t.known[p]; ok {
		return got
	}
	var got []fileTime
	for _, abs := range t.dir.expand(p) {
		if st, ok := stampOf(abs); ok {
			got = append(got, fileTime{t.dir.showMatch(p, abs), st.mtime})
		}
	}
	t.known[p] = got
	return got
}
