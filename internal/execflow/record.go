package execflow

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/workflow"
)

// This file keeps a workflow's state file up to date while it runs: which
// jobs were begun, and which are done.

// recordEvery is the shortest time between two writes of the state file
// while a run goes on: the jobs that end in between are recorded in one
// write.
const recordEvery = time.Second

// Begin records in the state file, before anything runs, that the run
// begins every job of the plan that runs and declares outputs ("started":
// its outputs are not done until the job succeeds), and starts keeping
// the file up to date as jobs end: give the pool [Plan.Recorder], then
// call [Plan.Save] once Run has returned. Should the run be cut off
// (killed, or the machine stopped), the next plan runs the jobs it had
// begun and not seen succeed ([Incomplete]), whatever the times of their
// outputs say. The file is written atomically and synced, with its
// folder, before Begin returns. Begin does nothing when no job with
// outputs runs; it may be called once. The error names the file.
func (p *Plan) Begin() error {
	if p.state == nil {
		return nil
	}
	if p.begun {
		panic("execflow: Plan.Begin called twice")
	}
	p.begun = true
	live := &state{Version: stateVersion, Jobs: maps.Clone(p.state.Jobs)}
	if live.Jobs == nil {
		live.Jobs = make(map[string]jobState)
	}
	begun := 0
	for _, d := range p.Decisions {
		if d.Run && len(d.Job.Outputs) > 0 {
			live.Jobs[d.Job.ID] = jobState{Command: commandHash(jobCommand(p.wf, d.Job)), Status: statusStarted}
			begun++
		}
	}
	if begun == 0 {
		return nil // nothing with outputs runs: Save alone records the skips
	}
	if err := writeState(p.stateFile, live); err != nil {
		return fmt.Errorf("execflow: writing the state file %s: %w", p.stateFile, err)
	}
	r := &recorder{plan: p, live: live, nudge: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	p.rec.Store(r) // the pool's listener may be reading it
	go r.loop()
	return nil
}

// Recorder returns the pool option that records, in the state file that
// [Plan.Begin] wrote, each job of the plan that succeeds as done and each
// that fails (or whose worker dies) as failed, writing the file once a
// second at most, so that a run that is cut off loses little of what it
// made. It does nothing for jobs without outputs, before Begin, or when
// no job declares outputs.
func (p *Plan) Recorder() engine.Option {
	return engine.OnEvent(func(e engine.Event) {
		r := p.rec.Load()
		if e.Kind != engine.JobStatus || e.Func != funcName || r == nil {
			return
		}
		i, ok := p.byID[e.Labels[LabelID]]
		if !ok || len(p.Decisions[i].Job.Outputs) == 0 {
			return
		}
		j := p.Decisions[i].Job
		old := p.state.Jobs[j.ID]
		rec := jobState{Command: commandHash(jobCommand(p.wf, j)), Made: old.Made, Inputs: old.Inputs}
		switch {
		case e.New == engine.Succeeded:
			// What it made, once Queue has returned the jobs; before
			// that, a job with output patterns is left started, and Save
			// records it.
			rec.Made = nil
			if slices.ContainsFunc(j.Outputs, workflow.IsPattern) {
				rec.Status = statusStarted
			}
			if jobs := p.jobs.Load(); jobs != nil {
				if job := (*jobs)[j.ID]; job != nil {
					res, _ := job.Result()
					rec.Made, rec.Status, rec.Inputs = res.Outputs, "", inputsOf(res)
				}
			}
		case e.New == engine.Failed || e.New == engine.Aborted:
			rec.Status = endStatus(e.Err)
		default:
			return
		}
		r.set(j.ID, rec)
	})
}

// recorder writes the state file while a run goes on.
type recorder struct {
	plan    *Plan
	mu      sync.Mutex
	live    *state // what the file should say; guarded by mu
	nudge   chan struct{}
	stop    chan struct{}
	stopped chan struct{}
}

func (r *recorder) set(id string, rec jobState) {
	r.mu.Lock()
	r.live.Jobs[id] = rec
	r.mu.Unlock()
	select {
	case r.nudge <- struct{}{}:
	default:
	}
}

// loop writes the file when it changed, recordEvery apart at most, until
// stop is closed. A write that fails is tried again at the next change;
// Save writes the last state, and says so if that fails.
func (r *recorder) loop() {
	defer close(r.stopped)
	for {
		select {
		case <-r.nudge:
		case <-r.stop:
			return
		}
		r.mu.Lock()
		snap := &state{Version: stateVersion, Jobs: maps.Clone(r.live.Jobs)}
		r.mu.Unlock()
		writeState(r.plan.stateFile, snap)
		select {
		case <-time.After(recordEvery):
		case <-r.stop:
			return
		}
	}
}

// end stops the loop, once a write in progress is done.
func (r *recorder) end() {
	close(r.stop)
	<-r.stopped
}

// Save records in the state file, once the pool's Run has returned, what
// the run made: every job with outputs that succeeded or was skipped is
// done (with its command, and the files it made: [Result.Outputs] of a
// success, what the file said of a skipped job), every job that ran and failed (or whose
// worker died) failed, every job that the run's interruption stopped
// (its error is context.Canceled) or that was still running started; it
// keeps what it knew of the jobs that
// did not run and of those [PlanOptions.Others] names, and drops the jobs
// the workflow no longer has. jobs are as
// [Queue] returned them for this plan. It writes the file atomically and
// synced (a temporary file renamed), with mode 0666 less the umask, and
// only when its content changes; when no job declares outputs it writes
// nothing. The error names the file.
func (p *Plan) Save(jobs map[string]*engine.Job[Result]) error {
	if p.state == nil {
		return nil
	}
	onDisk := p.state
	if r := p.rec.Swap(nil); r != nil {
		r.end()
		onDisk = nil // Begin and the recorder wrote it: write it again
	}
	next := &state{Version: stateVersion, Jobs: make(map[string]jobState)}
	for _, j := range p.wf.Jobs {
		if len(j.Outputs) == 0 {
			continue
		}
		old, known := p.state.Jobs[j.ID]
		st, ran := engine.Pending, false
		if job := jobs[j.ID]; job != nil {
			st = job.Status()
			ran = len(job.Attempts()) > 0
		}
		if st == engine.Skipped && known {
			next.Jobs[j.ID] = old // what made it up to date: the same record
			continue
		}
		done := jobState{Command: commandHash(jobCommand(p.wf, j)), Made: old.Made, Inputs: old.Inputs}
		switch {
		case st == engine.Succeeded:
			res, _ := jobs[j.ID].Result()
			done.Made, done.Inputs = res.Outputs, inputsOf(res)
			next.Jobs[j.ID] = done
		case st == engine.Skipped:
			next.Jobs[j.ID] = done
		case ran && (st == engine.Failed || st == engine.Aborted):
			_, err := jobs[j.ID].Result()
			done.Status = endStatus(err)
			next.Jobs[j.ID] = done
		case ran:
			// Begun, and cut off by the end of the run.
			done.Status = statusStarted
			next.Jobs[j.ID] = done
		case known:
			next.Jobs[j.ID] = old
		}
	}
	for id := range p.others {
		if old, known := p.state.Jobs[id]; known {
			next.Jobs[id] = old
		}
	}
	if onDisk != nil && onDisk.equal(next) {
		return nil
	}
	if err := writeState(p.stateFile, next); err != nil {
		return fmt.Errorf("execflow: writing the state file %s: %w", p.stateFile, err)
	}
	p.state = next
	return nil
}

// inputsOf returns what the input patterns of the job that succeeded
// with res matched, for the state file: nil for a job without any.
func inputsOf(res Result) *MatchedInputs {
	if res.Inputs.Hash == "" {
		return nil
	}
	m := res.Inputs
	return &m
}

// endStatus is the status of a job that ran and ended with err, not done:
// started when the run was interrupted under it (cut off), else failed.
func endStatus(err error) string {
	if errors.Is(err, context.Canceled) {
		return statusStarted
	}
	return statusFailed
}
