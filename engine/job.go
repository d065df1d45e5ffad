package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/poolrun/poolrun/cachepool"
)

// job is the untyped record of a queued job. Its fields are guarded by the
// pool's mutex, except status (atomic, for lock-free reads) and the fields
// set once before done is closed.
type job struct {
	pool   *Pool
	id     int
	fn     *funcEntry
	arg    []byte
	argErr error
	keys   []uint64
	sig    string // sigOf(keys)
	labels map[string]string

	deps       []*job
	dependents []*job
	waiting    int // dependencies that have not succeeded yet

	status atomic.Int32
	worker int
	err    error
	result []byte

	added, started, ended time.Time
	done                  chan struct{} // made by Job.Done; closed when the job is done

	retries  int           // how many more times it may be run again (Retries)
	timeout  time.Duration // its run time's bound; 0: none
	tries    int           // the runs it was sent for
	attempts []Attempt     // its runs that ended and were retried
	pid      int           // the process that ran its last run
	runSince time.Time     // when its current run started, as the pool saw it
	began    time.Time     // when its worker said that its current run began (JobStarted)
	revoking bool          // its worker was asked to hand it back (link.revoke)
	seq      uint64        // which of the jobs sent to its worker it is, from 1

	// cancelled: Cancel was called while it ran, with reason, at
	// cancelAt; its worker was asked to cancel it.
	cancelled    bool
	cancelReason string
	cancelAt     time.Time
	skip         bool // ends Skipped instead of running (Skip)

	cost       Resources     // what it takes while it runs (JobResources), Named aside
	named      []int64       // what it takes of the pool's named resources (namedCost)
	retryFails bool          // its retries are spent on failed runs too (RetryFailures)
	retryDelay time.Duration // the wait before a failed run is run again
}

func (j *job) Status() Status { return Status(j.status.Load()) }

// A Dep is something a job can depend on: a [*Job] of the same pool.
type Dep interface {
	record() *job
}

// A Job is a queued call of a registered function. Its methods are safe for
// concurrent use.
type Job[R any] struct {
	j      *job
	decode sync.Once
	val    R
	decErr error
}

func (j *Job[R]) record() *job { return j.j }

// ID returns the job's number in its pool, from 1 in the order of [Queue].
func (j *Job[R]) ID() int { return j.j.id }

// Status returns the job's current status.
func (j *Job[R]) Status() Status { return j.j.Status() }

// Done returns a channel that is closed when the job's status is final.
func (j *Job[R]) Done() <-chan struct{} {
	// Made when first asked for: most jobs are never waited for one by
	// one, and a channel costs a queued job 96 bytes.
	p := j.j.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if j.j.done == nil {
		j.j.done = make(chan struct{})
		if j.j.Status().Done() {
			close(j.j.done)
		}
	}
	return j.j.done
}

// Result returns the job's value once it Succeeded. Otherwise the value is
// R's zero value and the error says why there is none: [ErrNotRun] (wrapped)
// while the job has not finished, or the error it failed, was cancelled or
// was aborted with; a Skipped job has no value and no error.
func (j *Job[R]) Result() (R, error) {
	var zero R
	switch st := j.Status(); {
	case !st.Done():
		return zero, fmt.Errorf("job %d is %s: %w", j.j.id, st, ErrNotRun)
	case st == Skipped:
		return zero, nil
	case st != Succeeded:
		return zero, j.j.err
	}
	j.decode.Do(func() {
		if err := decodeValue(j.j.result, &j.val); err != nil {
			j.decErr = fmt.Errorf("job %d (%s): decoding the result (%T): %w", j.j.id, j.j.fn.name, zero, err)
		}
	})
	if j.decErr != nil {
		return zero, j.decErr
	}
	return j.val, nil
}

// Times returns when the job was added to the pool (the call of [Queue]: it
// was then Pending, or Queued if it waited for nothing), when it started and
// when it ended (zero where that has not happened). Start and end are
// measured by the worker that ran it.
func (j *Job[R]) Times() (added, started, ended time.Time) {
	p := j.j.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	return j.j.added, j.j.started, j.j.ended
}

// Started returns when the job's current (or last) run began on its
// worker, as the pool heard it, on the pool's clock: a job that is
// Running may wait in its worker's queue behind others sent ahead of it
// (zero until it begins, and for a job that never ran).
func (j *Job[R]) Started() time.Time {
	p := j.j.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	return j.j.began
}

// Worker returns the worker the job was sent to, from 1 (0 if none yet).
func (j *Job[R]) Worker() int {
	p := j.j.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	return j.j.worker
}

// Attempts returns the job's runs that have ended, in order: none for a
// job that never ran, one for most jobs, more for a job run again after
// its worker died (see [Retries]) or it failed (see [RetryFailures]).
func (j *Job[R]) Attempts() []Attempt {
	p := j.j.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	r := j.j
	as := slices.Clone(r.attempts)
	if st := r.Status(); st.Done() && r.tries > len(r.attempts) {
		// The last run: the job's own fields.
		as = append(as, Attempt{Worker: r.worker, PID: r.pid, Start: r.started, End: r.ended, Status: st, Err: r.err})
	}
	return as
}

// Cancel cancels a job: it becomes Cancelled, with a [*CancelledError]
// that gives reason as its error, and its dependents are cancelled in
// turn. A job that has not started is Cancelled at once. A running job has
// its context cancelled; it is Cancelled when it returns, whatever it
// returns, or, if it has not returned within the grace period
// (5 s), when its worker has been killed (and replaced). A job
// that has finished is left alone and Cancel returns an error wrapping
// [ErrNotCancellable], as it does for a second Cancel of a running job.
func (j *Job[R]) Cancel(reason string) error {
	p := j.j.pool
	p.mu.Lock()
	defer p.kick()
	defer p.mu.Unlock()
	switch st := j.j.Status(); {
	case st == Running && !j.j.cancelled && p.sched != nil && p.sched.cancelRunning(j.j, reason):
		return nil
	case st != Pending && st != Queued:
		return fmt.Errorf("job %d (%s) is %s: %w", j.j.id, j.j.fn.name, st, ErrNotCancellable)
	}
	p.finish(j.j, Cancelled, &CancelledError{Reason: reason})
	return nil
}

// A CancelledError is the error of a job cancelled with [Job.Cancel].
type CancelledError struct{ Reason string }

func (e *CancelledError) Error() string { return "cancelled: " + e.Reason }

// A JobOption configures one queued job.
type JobOption func(*jobOptions)

type jobOptions struct {
	deps    []Dep
	items   []cachepool.Handle
	labels  map[string]string
	retries int // -1: the pool's
	timeout time.Duration
	hasTime bool
	skip    bool
	cost    Resources
	fails   bool // RetryFailures
	delay   time.Duration
}

// Skip makes the job end Skipped instead of running, once its
// dependencies have succeeded (or been skipped): its work was done
// before, as a build tool finds from the files it would write. Its
// dependents then go on as after a success. If a dependency fails, it is
// Cancelled as any job would be.
func Skip() JobOption { return func(o *jobOptions) { o.skip = true } }

// JobRetries sets, for this job, how many times it is run again when its
// worker dies under it (see [Retries], which it overrides). Negative n
// panics.
func JobRetries(n int) JobOption {
	if n < 0 {
		panic(fmt.Sprintf("engine: JobRetries(%d): negative", n))
	}
	return func(o *jobOptions) { o.retries = n }
}

// JobTimeout bounds this job's run time (see [Timeout], which it
// overrides; 0 is no bound). Negative d panics.
func JobTimeout(d time.Duration) JobOption {
	if d < 0 {
		panic(fmt.Sprintf("engine: JobTimeout(%v): negative", d))
	}
	return func(o *jobOptions) { o.timeout, o.hasTime = d, true }
}

// An Attempt is one run of a job on a worker: the job's only one, or one
// of several with [Retries].
type Attempt struct {
	Worker int // the worker's place, from 1
	PID    int // the worker's process id
	// Start and End are when the attempt started and ended, as the pool
	// saw them.
	Start, End time.Time
	// Status is how the attempt ended: Succeeded, Failed, Cancelled or
	// Aborted; an attempt that was retried ended Aborted (its worker
	// died) or Failed (see [RetryFailures]). Err says why when it is not
	// Succeeded.
	Status Status
	Err    error
}

// attemptKey is the context key of a running job's attempt number.
type attemptKey struct{}

// JobAttempt returns the number of the run of the job whose context ctx
// is (or derives from): 1 for its first run, 2 for the first run again
// after a retry ([Retries], [RetryFailures]), and so on, as in the
// events' Attempt; 0 for a context that is no job's.
func JobAttempt(ctx context.Context) int {
	n, _ := ctx.Value(attemptKey{}).(int)
	return n
}

// After makes the job wait until every dep has succeeded; if one fails, is
// cancelled or is aborted, the job is cancelled with an error wrapping
// [ErrDependencyFailed]. Every dep must belong to the same pool.
func After(deps ...Dep) JobOption {
	return func(o *jobOptions) { o.deps = append(o.deps, deps...) }
}

// Needs declares cache items this job needs, on top of those its function
// declares with [Uses]. The items stay listed in the pool's window, and so
// stay cached in the workers that built them, until the job has finished.
func Needs(items ...cachepool.Handle) JobOption {
	return func(o *jobOptions) { o.items = append(o.items, items...) }
}

// Label attaches a key and value to the job, shown in events, errors and
// reports.
func Label(key, value string) JobOption {
	return func(o *jobOptions) {
		if o.labels == nil {
			o.labels = map[string]string{}
		}
		o.labels[key] = value
	}
}

// Queue adds a call of fn with arg to the pool and returns the job. It is
// safe to call from any goroutine, before and during [Pool.Run] (from a job
// listener or a scheduler, see [Pool.Go]). A job queued once Run has begun
// to stop (every job done and every scheduler returned, ctx ended, or no
// worker can be started), or after it has returned, is Cancelled at once
// with [ErrPoolClosed].
//
// The argument is encoded at once; if it cannot be, the job fails with that
// error when it would have run. Queue panics if a dependency belongs to
// another pool.
func Queue[A, R any](p *Pool, fn *Func[A, R], arg A, opts ...JobOption) *Job[R] {
	if p == nil || fn == nil {
		panic("engine: Queue with a nil pool or function")
	}
	o := jobOptions{retries: -1}
	for _, opt := range opts {
		opt(&o)
	}
	j := &job{pool: p, fn: fn.e, labels: o.labels,
		retries: p.cfg.retries, timeout: p.cfg.timeout}
	if o.retries >= 0 {
		j.retries = o.retries
	}
	if o.hasTime {
		j.timeout = o.timeout
	}
	j.skip = o.skip
	j.cost, j.retryFails, j.retryDelay = Resources{Slots: o.cost.Slots, Memory: o.cost.Memory}, o.fails, o.delay
	j.named = p.cfg.namedCost(o.cost.Named)
	j.arg, j.argErr = encodeValue(arg, p.cfg.maxValue)
	if j.argErr != nil {
		j.argErr = fmt.Errorf("encoding the argument (%T): %w", arg, j.argErr)
	}
	j.keys, j.sig = fn.e.keys, fn.e.sig
	if len(o.items) > 0 {
		j.keys = slices.Concat(fn.e.keys, handleKeys(o.items))
		slices.Sort(j.keys)
		j.keys = slices.Compact(j.keys)
		j.sig = sigOf(j.keys)
	}
	for _, d := range o.deps {
		dj := d.record()
		if dj.pool != p {
			panic(fmt.Sprintf("engine: After: job %d belongs to another pool", dj.id))
		}
		j.deps = append(j.deps, dj)
	}
	p.add(j)
	return &Job[R]{j: j}
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}
