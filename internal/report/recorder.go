package report

import (
	"errors"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/procmem"
	"github.com/poolrun/poolrun/internal/workflow"
)

// A Recorder gathers a pool's report from its events: every job's runs,
// every worker's items, the jobs past the cache budget. Feed it with
// [Recorder.Event] (engine.OnEvent); it is safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	jobs   map[int]*Job
	items  itemLog
	budget BudgetExceeded
	// rssFloor is poolrun's own peak RSS when a run's commands ended
	// (see Command.PeakRSS).
	rssFloor int64
}

// NewRecorder returns a Recorder that has seen no event.
func NewRecorder() *Recorder { return &Recorder{jobs: map[int]*Job{}} }

// Event records e.
func (rec *Recorder) Event(e engine.Event) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	switch e.Kind {
	case engine.JobAdded:
		rec.jobs[e.JobID] = &Job{ID: e.JobID, Func: e.Func, Labels: e.Labels, Status: e.New.String(), Added: e.Time}
	case engine.JobStatus:
		if r := rec.jobs[e.JobID]; r != nil {
			jobStatus(r, e)
		}
	case engine.JobStarted:
		// The run sent last began; the engine reports it once, while the
		// job is Running on that worker.
		if r := rec.jobs[e.JobID]; r != nil && r.Sent != nil {
			t := e.Time
			r.Started = &t
		}
	case engine.ItemBuilt, engine.ItemEvicted, engine.WorkerDied:
		rec.items.event(e)
	case engine.BudgetExceeded:
		rec.budget.Jobs++
		if e.CacheBytes > rec.budget.MaxBytes {
			rec.budget.MaxBytes, rec.budget.Worker, rec.budget.JobID = e.CacheBytes, e.Worker, e.JobID
		}
	}
}

// jobStatus records in r the change of status of e.
func jobStatus(r *Job, e engine.Event) {
	r.Status = e.New.String()
	t := e.Time
	if e.New == engine.Running {
		// Sent: it begins later, with a JobStarted event.
		r.Sent, r.Started, r.Worker = &t, nil, e.Worker
	}
	if e.Old == engine.Running && e.New == engine.Queued && e.Err == nil {
		// Taken back before it started (sent ahead to a worker that
		// left, or revoked for an idle one): not a run.
		r.Sent, r.Started, r.Worker = nil, nil, 0
		return
	}
	if e.Old == engine.Running && (e.New == engine.Queued || e.New.Done() && len(r.Attempts) > 0) {
		// A run that is retried, or the last of a job that was.
		a := Attempt{Worker: e.Worker, Started: r.Started, Ended: t, Status: e.New.String()}
		if r.Sent != nil {
			a.Sent = *r.Sent
		}
		if e.New == engine.Queued {
			a.Status = engine.Aborted.String()
			if runFailed(e.Err) {
				a.Status = engine.Failed.String() // RetryFailures
			}
		}
		if e.Err != nil {
			a.failed(e.Err)
		}
		r.Attempts = append(r.Attempts, a)
	}
	if e.New.Done() {
		r.Ended = &t
		if b := r.Begin(); b != nil {
			r.Seconds = t.Sub(*b).Seconds()
		}
		if e.Err != nil {
			r.Error = e.Err.Error()
		}
	}
}

// runFailed reports whether err, the end of a run that goes again, is the
// run's own failure (its function's error, timeout or panic: a workflow
// job's retries:), not its worker's death.
func runFailed(err error) bool {
	var re *engine.RemoteError
	var te *engine.TimeoutError
	var pe *engine.PanicError
	return errors.As(err, &re) || errors.As(err, &te) || errors.As(err, &pe)
}

// failed records in a how its run failed with err: the command's exit
// status and standard error, or its timeout.
func (a *Attempt) failed(err error) {
	a.Error = err.Error()
	if f, ok := execflow.FailureOf(err); ok {
		a.ExitCode, a.Signal, a.StderrTail = &f.ExitCode, f.Signal, f.StderrTail
	}
	var te *engine.TimeoutError
	a.TimedOut = errors.As(err, &te)
}

// Budget returns the jobs past the cache budget so far.
func (rec *Recorder) Budget() BudgetExceeded {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.budget
}

// CommandRSSFloor is poolrun's own peak RSS once a run's commands had
// ended, as NoteCommands found it (see [Command.PeakRSS]); 0 before.
func (rec *Recorder) CommandRSSFloor() int64 {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.rssFloor
}

// Job calls f with the record of job id, under the recorder's lock; not
// at all if there is none.
func (rec *Recorder) Job(id int, f func(*Job)) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if j := rec.jobs[id]; j != nil {
		f(j)
	}
}

// NoteCommands records, for each job of a workflow run, its id, line,
// exit status and peak memory, once Run has returned.
func (rec *Recorder) NoteCommands(wf *workflow.Workflow, jobs map[string]*engine.Job[execflow.Result]) {
	floor := procmem.PeakRSS()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.rssFloor = floor
	for _, wj := range wf.Jobs {
		j := jobs[wj.ID]
		if j == nil {
			continue
		}
		r := rec.jobs[j.ID()]
		if r == nil {
			continue
		}
		r.JobID, r.Line = wj.ID, wj.Line
		res, err := j.Result()
		switch st := j.Status(); {
		case st == engine.Succeeded:
			r.ExitStatus = new(int)
			*r.ExitStatus = res.ExitCode
			r.PeakRSS = res.PeakRSS
		case st == engine.Failed && err != nil:
			// The job's own command's end; not an item's command's.
			if f, ok := execflow.FailureOf(err); ok && f.Item == "" {
				r.ExitStatus, r.Signal, r.PeakRSS = &f.ExitCode, f.Signal, f.PeakRSS
			}
		}
	}
}

// Report is the report of the pool whose events rec recorded and whose
// figures at the end are st: command and opts as the report states them,
// the pool started at started and ran for wall, smp its samples (nil if
// none), result the command's own.
func (rec *Recorder) Report(command string, opts Options, st engine.Stats, started time.Time, wall time.Duration, smp *Sampler, result any) *Pool {
	r := &Pool{Version: Version, Command: command, Options: opts, Started: started, Result: result}
	rec.mu.Lock()
	for _, j := range rec.jobs {
		r.Jobs = append(r.Jobs, j)
	}
	r.Totals.BudgetExceeded = rec.budget
	r.Totals.CommandRSSFloor = rec.rssFloor
	for _, w := range st.Workers {
		wr := WorkerOf(w)
		if smp != nil {
			wr.Samples = smp.Samples(w.Index)
		}
		wr.Items = rec.items.items(w.Index)
		r.Workers = append(r.Workers, wr)
	}
	rec.mu.Unlock()
	if smp != nil {
		r.SampleSeconds = smp.interval.Seconds()
	}
	sort.Slice(r.Jobs, func(a, b int) bool { return r.Jobs[a].ID < r.Jobs[b].ID })
	r.Totals.Jobs, r.Totals.ByStatus, r.Totals.WallSeconds, r.Totals.Publishes = len(r.Jobs), map[string]int{}, wall.Seconds(), st.Publishes
	for i, n := range st.Counts {
		if n > 0 {
			r.Totals.ByStatus[engine.Status(i).String()] = n
		}
	}
	tot := st.Total()
	c := tot.Cache
	r.Totals.StaleEvictions, r.Totals.BudgetEvictions = tot.Evicted, tot.BudgetEvicted
	r.Totals.Builds, r.Totals.Hits, r.Totals.Evictions, r.Totals.PeakBytes = c.Builds, c.Hits, c.Evictions, c.PeakBytes
	r.Totals.SummedPeakBytes, r.Totals.StaleByteSeconds, r.Totals.PeakRSS = st.PeakCacheBytes, st.StaleByteSeconds, tot.PeakRSS
	return r
}

// WorkerOf is a worker's entry of a report, without samples and items.
func WorkerOf(w engine.WorkerStats) Worker {
	return Worker{Index: w.Index, PID: w.PID, Host: HostOf(w), Jobs: w.Jobs, Restarts: w.Restarts,
		StaleEvictions: w.Evicted, BudgetEvictions: w.BudgetEvicted, PeakRSS: w.PeakRSS, Cache: cacheOf(w.Cache)}
}

func cacheOf(s cachepool.Stats) Cache {
	return Cache{Hits: s.Hits, Builds: s.Builds, Evictions: s.Evictions, Resident: s.Resident,
		Bytes: s.Bytes, PeakBytes: s.PeakBytes, BuildTimeSeconds: s.BuildTime.Seconds()}
}

// thisHost is this host's name, as os.Hostname gives it ("" if it fails).
var thisHost = sync.OnceValue(func() string {
	h, _ := os.Hostname()
	return h
})

// HostOf is the name of the host of w's process, as a report gives it:
// the one it gave when it joined from elsewhere, else this host's.
func HostOf(w engine.WorkerStats) string {
	if w.Host != "" {
		return w.Host
	}
	return thisHost()
}

// itemLog gathers the items' lifetimes per worker from the pool's
// events. The recorder's lock guards it.
type itemLog struct {
	byWorker map[int][]*Item
	// open are the lifetimes not ended yet, per worker, by name.
	open map[int]map[string]*Item
}

// event takes an ItemBuilt, ItemEvicted or WorkerDied event.
func (l *itemLog) event(e engine.Event) {
	if l.byWorker == nil {
		l.byWorker, l.open = map[int][]*Item{}, map[int]map[string]*Item{}
	}
	open := l.open[e.Worker]
	switch e.Kind {
	case engine.ItemBuilt:
		r := &Item{Name: e.Item, Bytes: e.ItemBytes, BuildStarted: e.ItemStart, Built: e.ItemEnd}
		l.byWorker[e.Worker] = append(l.byWorker[e.Worker], r)
		if open == nil {
			open = map[string]*Item{}
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
func (l *itemLog) items(w int) []*Item { return l.byWorker[w] }
