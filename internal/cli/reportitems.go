package cli

import (
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/procmem"
	"github.com/poolrun/poolrun/internal/workflow"
)

// itemRecord is one lifetime of an item on a worker, as the report gives
// it: from the start of its build to its eviction.
type itemRecord struct {
	// Name is the item's cache name: a workflow item's is
	// "poolrun.item:NAME@HASH", a scaffold's as its package defines it.
	Name string `json:"name"`
	// Bytes is its size, as its Size function reported it (0 without
	// one).
	Bytes int64 `json:"bytes"`
	// BuildStarted and Built are when its build began and ended.
	BuildStarted time.Time `json:"build_started"`
	Built        time.Time `json:"built"`
	// Evicted is when it was evicted, and EvictedBy why: "policy" (no
	// unfinished job needed it), "budget" (to make room within
	// --cache-budget), "end" (the worker cleared its cache when the pool
	// ended) or "died" (its worker process died: the time is when the
	// pool learnt it). Both omitted for an item whose end the pool never
	// heard of (its worker was killed or left).
	Evicted   *time.Time `json:"evicted,omitempty"`
	EvictedBy string     `json:"evicted_by,omitempty"`
}

// itemLog gathers the items' lifetimes per worker from the pool's
// events. The session's lock guards it.
type itemLog struct {
	byWorker map[int][]*itemRecord
	// open are the lifetimes not ended yet, per worker, by name.
	open map[int]map[string]*itemRecord
}

// event takes an ItemBuilt, ItemEvicted or WorkerDied event.
func (l *itemLog) event(e engine.Event) {
	if l.byWorker == nil {
		l.byWorker, l.open = map[int][]*itemRecord{}, map[int]map[string]*itemRecord{}
	}
	open := l.open[e.Worker]
	switch e.Kind {
	case engine.ItemBuilt:
		r := &itemRecord{Name: e.Item, Bytes: e.ItemBytes, BuildStarted: e.ItemStart, Built: e.ItemEnd}
		l.byWorker[e.Worker] = append(l.byWorker[e.Worker], r)
		if open == nil {
			open = map[string]*itemRecord{}
			l.open[e.Worker] = open
		}
		open[e.Item] = r
	case engine.ItemEvicted:
		if r := open[e.Item]; r != nil {
			t := e.ItemEnd
			r.Evicted, r.EvictedBy = &t, e.Reason.String()
			delete(open, e.Item)
		}
	case engine.WorkerDied:
		// Its process is gone, and the items it held with it.
		for name, r := range open {
			t := e.Time
			r.Evicted, r.EvictedBy = &t, "died"
			delete(open, name)
		}
	}
}

// items returns the lifetimes of worker w's items, in the order they were
// built.
func (l *itemLog) items(w int) []*itemRecord { return l.byWorker[w] }

// commandRecord is what a run report says of a job's command, beside the
// job's own fields.
type commandRecord struct {
	// JobID is the workflow's id of the job; Line the line of the entry
	// of the workflow file it came from (jobs of one foreach share it).
	JobID string `json:"job_id,omitempty"`
	Line  int    `json:"line,omitempty"`
	// ExitStatus is its command's exit status (-1 for one killed by a
	// signal, named by Signal); omitted where the command did not end by
	// itself (it did not run, or timed out, or was cancelled).
	ExitStatus *int   `json:"exit_status,omitempty"`
	Signal     string `json:"signal,omitempty"`
	// PeakRSS is the peak resident memory of the command's largest
	// process (wait4's ru_maxrss), in bytes; omitted where unknown: a
	// command that did not run, one that failed using no more memory
	// than poolrun did as it started it, or a report of another command
	// (a failed command's figure is to the KiB).
	// Linux counts in it the memory of poolrun itself when it started the
	// command (an exec takes the high-water mark of the image it
	// replaces): a figure at or below the report's
	// totals.command_rss_floor_bytes says only that the command used no
	// more than that.
	PeakRSS int64 `json:"peak_rss_bytes,omitempty"`
}

// noteCommands records, for each job of a workflow run, its id, line,
// exit status and peak memory, once Run has returned.
func (s *session) noteCommands(wf *workflow.Workflow, jobs map[string]*engine.Job[execflow.Result]) {
	floor := procmem.PeakRSS()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rssFloor = floor
	for _, wj := range wf.Jobs {
		j := jobs[wj.ID]
		if j == nil {
			continue
		}
		rec := s.jobs[j.ID()]
		if rec == nil {
			continue
		}
		rec.JobID, rec.Line = wj.ID, wj.Line
		res, err := j.Result()
		switch st := j.Status(); {
		case st == engine.Succeeded:
			rec.ExitStatus = new(int)
			*rec.ExitStatus = res.ExitCode
			rec.PeakRSS = res.PeakRSS
		case st == engine.Failed && err != nil:
			// The job's own command's end; not an item's command's.
			if f, ok := execflow.FailureOf(err); ok && f.Item == "" {
				rec.ExitStatus, rec.Signal, rec.PeakRSS = &f.ExitCode, f.Signal, f.PeakRSS
			}
		}
	}
}
