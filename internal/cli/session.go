package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/poolrun/poolrun/cluster"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/workflow"
)

// session runs one pool with progress display, job records and reports.
type session struct {
	flags  *poolFlags
	stderr io.Writer
	prog   *progress

	mu     sync.Mutex
	jobs   map[int]*jobRecord
	budget budgetExceeded
	items  itemLog // the items' lifetimes (reportitems.go)
	// rssFloor is poolrun's own peak RSS when a run's commands ended
	// (see commandRecord.PeakRSS).
	rssFloor int64

	// started is when run started the pool; samples its workers' series,
	// taken while it ran when a report is asked for (nil otherwise). Both
	// are set once run returns.
	started  time.Time
	samples  *sampler
	listener *cluster.Listener // with --listen

	// inProcess makes the local workers (-j N, N > 0) goroutines of this
	// process (engine.InProcess) rather than worker processes: poolrun run,
	// whose jobs only wait on their commands.
	inProcess bool
	// summary, if set, is what finish prints in place of the table of the
	// workers: the end of poolrun run, given the pool's figures.
	summary func(engine.Stats)
}

// budgetExceeded sums the BudgetExceeded events of a pool.
type budgetExceeded struct {
	// Jobs counts the jobs whose own items took their worker past the
	// budget (--cache-budget); 0 without a budget.
	Jobs int `json:"jobs"`
	// MaxBytes is the most a worker's cache held when it was past the
	// budget; Worker and JobID say where and when (0 if Jobs is 0).
	MaxBytes int64 `json:"max_bytes"`
	Worker   int   `json:"worker"`
	JobID    int   `json:"job"`
}

// jobRecord is what the report says of one job, gathered from events.
// Attempts lists its runs when there were more than one (--retries).
type jobRecord struct {
	// ID numbers the job in its pool, from 1, in the order it was queued.
	ID int `json:"id"`
	// Func is the name of the job's registered function, as
	// "scaffold.connect" or "poolrun.exec" (a workflow's command).
	Func string `json:"func"`
	// Labels are the job's labels: a workflow job's id is under "id".
	Labels map[string]string `json:"labels,omitempty"`
	// Status is how the job ended: succeeded, failed, cancelled, aborted
	// or skipped; pending, queued or running if the pool stopped first.
	Status string `json:"status"`
	// Worker is the worker (from 1; 1 in serial mode) that last ran it;
	// omitted if it never ran.
	Worker int `json:"worker,omitempty"`
	// Added is when it was queued; Sent when its last run was sent to its
	// worker, Started when that run began there, Ended when it ended; each
	// omitted if it never happened (Started, for one, of a run cancelled
	// or whose worker died before it began). A worker sent jobs ahead runs
	// them one after the other: Sent may precede Started by the runs
	// before it. A report of an older poolrun has no sent, and the send
	// time under started.
	Added   time.Time  `json:"added"`
	Sent    *time.Time `json:"sent,omitempty"`
	Started *time.Time `json:"started,omitempty"`
	Ended   *time.Time `json:"ended,omitempty"`
	// Seconds is Ended less Started, or less Sent for a run that never
	// began: how long its last run took.
	Seconds float64 `json:"seconds,omitempty"`
	// Error is why it failed, was cancelled or aborted.
	Error string `json:"error,omitempty"`
	// Attempts lists every run of a job that ran more than once, in
	// order, the last included; omitted for a job that ran at most once.
	Attempts []attemptRecord `json:"attempts,omitempty"`
	// A workflow job's id, line, exit status and peak memory (run).
	commandRecord
}

// begin is when the job's last run began as far as the record knows:
// Started, else Sent (a run that never began; a report of an older
// poolrun, whose Started is the send time); nil if it never ran.
func (j *jobRecord) begin() *time.Time { return cmp.Or(j.Started, j.Sent) }

// jobName names a job in a message: its workflow id where it has one,
// else its number.
func jobName(id int, labels map[string]string) string {
	if name, ok := labels[execflow.LabelID]; ok {
		return strconv.Quote(name)
	}
	return strconv.Itoa(id)
}

// attemptRecord is one run of a job that ran more than once.
type attemptRecord struct {
	Worker int       `json:"worker"` // the worker it ran on, from 1
	Sent   time.Time `json:"sent"`   // when it was sent to that worker
	// Started is when it began there; omitted for a run that never began
	// (its worker died, or it was cancelled, first). A report of an older
	// poolrun has no sent, and the send time here.
	Started *time.Time `json:"started,omitempty"`
	Ended   time.Time  `json:"ended"` // when it ended
	// Status is how the run ended: for one that was run again, aborted
	// (its worker died) or failed (a workflow job's retries:), else the
	// job's status.
	Status string `json:"status"`
	Error  string `json:"error,omitempty"` // why it did not succeed
	// ExitCode, Signal and StderrTail are, for a run whose command (a
	// workflow job's, or an item's it needed) failed, its exit status (-1
	// when killed by a signal), the signal's name and the last lines of
	// its standard error (see execflow.FailureOf); TimedOut says that
	// the run passed its timeout. Each omitted otherwise.
	ExitCode   *int   `json:"exit_code,omitempty"`
	Signal     string `json:"signal,omitempty"`
	StderrTail string `json:"stderr_tail,omitempty"`
	TimedOut   bool   `json:"timed_out,omitempty"`
}

// failed records in a how its run failed with err: the command's exit
// status and standard error, or its timeout.
func (a *attemptRecord) failed(err error) {
	a.Error = err.Error()
	if f, ok := execflow.FailureOf(err); ok {
		a.ExitCode, a.Signal, a.StderrTail = &f.ExitCode, f.Signal, f.StderrTail
	}
	var te *engine.TimeoutError
	a.TimedOut = errors.As(err, &te)
}

// begin is when the run began as far as the record knows: Started, else
// Sent.
func (a *attemptRecord) begin() time.Time {
	if a.Started != nil {
		return *a.Started
	}
	return a.Sent
}

func newSession(f *poolFlags, stderr io.Writer) *session {
	return &session{flags: f, stderr: stderr, jobs: map[int]*jobRecord{}}
}

// options returns the pool's options; the listener feeds the records and
// the progress display.
func (s *session) options() []engine.Option {
	workers := engine.Workers(s.flags.workers())
	if n := s.flags.workers(); s.inProcess && n > 0 {
		workers = engine.InProcess(n)
	}
	opts := []engine.Option{
		workers,
		engine.WindowCapacity(s.flags.capacity),
		engine.OnEvent(s.event),
	}
	if s.flags.failFast {
		opts = append(opts, engine.FailFast())
	}
	if s.flags.retries > 0 {
		opts = append(opts, engine.Retries(s.flags.retries))
	}
	if s.flags.timeout > 0 {
		opts = append(opts, engine.Timeout(s.flags.timeout))
	}
	if s.listener != nil {
		opts = append(opts, s.listener.Option())
		if s.flags.jobs == 0 && !s.flags.serial {
			// -j 0 with --listen: no local worker, not the serial one.
			opts = append(opts, engine.RemoteOnly(max(s.flags.joinTimeout, time.Second)))
		}
	}
	return append(opts, s.flags.cache.options()...)
}

// listen starts the pool's server for remote workers, with --listen; the
// caller closes it with closeListener once the pool has run. The join
// file names outputs, the folders (absolute) where the jobs write, which a
// worker checks it can write in before it joins.
func (s *session) listen(outputs ...string) error {
	if s.flags.listen == "" {
		return nil
	}
	opts := []cluster.ServerOption{cluster.Outputs(outputs...)}
	if s.flags.tlsCert != "" {
		opts = append(opts, cluster.TLSFiles(s.flags.tlsCert, s.flags.tlsKey))
	}
	l, err := cluster.Listen(s.flags.listen, s.flags.joinFile, opts...)
	if err != nil {
		return badInput(fmt.Errorf("poolrun: --listen %s: %w", s.flags.listen, err))
	}
	s.listener = l
	fmt.Fprintf(s.stderr, "poolrun: workers may join with: poolrun worker --join-file %s\n", s.flags.joinFile)
	return nil
}

// closeListener stops the server for remote workers and removes the join
// file.
func (s *session) closeListener() {
	if s.listener != nil {
		s.listener.Close()
	}
}

func (s *session) event(e engine.Event) {
	var retry string // a job's worker died and it runs again: say so
	s.mu.Lock()
	switch e.Kind {
	case engine.JobAdded:
		s.jobs[e.JobID] = &jobRecord{ID: e.JobID, Func: e.Func, Labels: e.Labels, Status: e.New.String(), Added: e.Time}
	case engine.JobStatus:
		r := s.jobs[e.JobID]
		if r == nil {
			break
		}
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
			break
		}
		if e.Old == engine.Running && (e.New == engine.Queued || e.New.Done() && len(r.Attempts) > 0) {
			// A run that is retried, or the last of a job that was.
			a := attemptRecord{Worker: e.Worker, Started: r.Started, Ended: t, Status: e.New.String()}
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
			if e.New == engine.Queued {
				retry = retryLine(e)
			}
		}
		if e.New.Done() {
			r.Ended = &t
			if b := r.begin(); b != nil {
				r.Seconds = t.Sub(*b).Seconds()
			}
			if e.Err != nil {
				r.Error = e.Err.Error()
			}
		}
	case engine.JobStarted:
		// The run sent last began; the engine reports it once, while the
		// job is Running on that worker.
		if r := s.jobs[e.JobID]; r != nil && r.Sent != nil {
			t := e.Time
			r.Started = &t
		}
	case engine.ItemBuilt, engine.ItemEvicted, engine.WorkerDied:
		s.items.event(e)
	case engine.BudgetExceeded:
		s.budget.Jobs++
		if e.CacheBytes > s.budget.MaxBytes {
			s.budget.MaxBytes, s.budget.Worker, s.budget.JobID = e.CacheBytes, e.Worker, e.JobID
		}
	}
	s.mu.Unlock()
	if s.prog != nil {
		s.prog.update(e)
	}
	switch {
	case retry == "":
	case s.prog != nil:
		s.prog.printf("%s", retry)
	default:
		fmt.Fprint(s.stderr, retry)
	}
}

// retryLine is the line that says that a job's run ended as e says and
// that the job runs again: the first line of the run's error (a
// command's error names its job already), and the next attempt's number.
func retryLine(e engine.Event) string {
	name := jobName(e.JobID, e.Labels)
	msg, _, _ := strings.Cut(e.Err.Error(), "\n")
	if !strings.HasPrefix(msg, "job "+name) {
		msg = "job " + name + ": " + msg
	}
	return fmt.Sprintf("poolrun: %s; running it again (attempt %d)\n", msg, e.Attempt+1)
}

// run runs p with the progress display, and returns the wall time and
// Run's error. When a report is asked for, it samples the workers' cache
// and memory while p runs (see sampler).
func (s *session) run(ctx context.Context, p *engine.Pool) (time.Duration, error) {
	if !s.flags.quiet {
		slots := s.flags.workers()
		if s.listener != nil {
			slots = maxWorkers // and those that join
		}
		var stats func() engine.Stats
		if s.listener != nil {
			stats = p.Stats // the status counts the workers by host
		}
		s.prog = newProgress(ctx, s.stderr, slots, stats)
	}
	start := time.Now()
	var smp *sampler
	if s.flags.report != "" {
		smp = startSampler(p.Stats, s.flags.workers() == 0, start)
	}
	err := p.Run(ctx)
	wall := time.Since(start)
	if errors.Is(err, engine.ErrNoWorkers) {
		err = fmt.Errorf("%w (start workers with: poolrun worker --join-file %s)", err, s.flags.joinFile)
	}
	if smp != nil {
		smp.stop()
	}
	s.mu.Lock()
	s.started, s.samples = start, smp
	s.mu.Unlock()
	if s.prog != nil {
		s.prog.stop()
	}
	return wall, err
}

// finish reports a pool's end: the table or the summary (unless quiet),
// the JSON report (if asked), and the error to return.
func (s *session) finish(stdout io.Writer, command string, p *engine.Pool, runErr error, wall time.Duration, extra any) error {
	st := p.Stats()
	if !s.flags.quiet {
		if s.summary == nil {
			printTable(stdout, st, wall)
		}
		s.mu.Lock()
		b := s.budget
		s.mu.Unlock()
		if b.Jobs > 0 {
			fmt.Fprintf(s.stderr, "poolrun: the items of %d job(s) alone took their worker's cache past --cache-budget %s (at most %s: job %d on worker %d)\n",
				b.Jobs, humanBytes(int64(s.flags.cache.budget)), humanBytes(b.MaxBytes), b.JobID, b.Worker)
		}
		if s.summary != nil {
			s.summary(st) // its last line is the verdict of a run that succeeded
		}
	}
	if s.flags.report != "" {
		if err := writeReport(s.flags.report, s.makeReport(command, st, wall, extra)); err != nil {
			return errors.Join(runErr, fmt.Errorf("poolrun: writing the report: %w", err))
		}
	}
	return runErr
}

// jobEnds returns how the jobs of workflow wf that the run queued (jobs)
// ended, in the workflow's order, once Run has returned and noteCommands
// has been called. An interrupted job's error in the report gets the line
// that names what its run removed of its outputs, which the pool did not
// hear (see execflow.Interrupted).
func (s *session) jobEnds(wf *workflow.Workflow, jobs map[string]*engine.Job[execflow.Result]) []jobEnd {
	var ends []jobEnd
	for _, j := range wf.Jobs {
		job := jobs[j.ID]
		if job == nil {
			continue
		}
		e := jobEnd{id: j.ID, status: job.Status()}
		_, err := job.Result()
		e.interrupted = e.status == engine.Aborted && errors.Is(err, context.Canceled)
		var removed string
		if e.interrupted {
			removed = execflow.Interrupted(wf.File, j.ID)
		}
		if e.status == engine.Failed || e.status == engine.Aborted {
			e.msg = failureMessage(wf, j, e.status, err, removed, len(job.Attempts()))
			e.line, e.reason = failureLine(wf, j, e.msg)
		}
		s.mu.Lock()
		if rec := s.jobs[job.ID()]; rec != nil {
			e.seconds, e.peakRSS = rec.Seconds, rec.PeakRSS
			if removed != "" {
				rec.Error += "\n" + removed
			}
		}
		s.mu.Unlock()
		ends = append(ends, e)
	}
	return ends
}

// thisHost is this host's name, as os.Hostname gives it ("" if it fails).
var thisHost = sync.OnceValue(func() string {
	h, _ := os.Hostname()
	return h
})

// workerHost is the name of the host of w's process: the one it gave
// when it joined from elsewhere, else this host's.
func workerHost(w engine.WorkerStats) string {
	if w.Host != "" {
		return w.Host
	}
	return thisHost()
}
