package engine

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/poolrun/poolrun/internal/enginehost"
	"github.com/poolrun/poolrun/shm"
)

// Defaults of a pool's start and shutdown.
const (
	// defaultStartTimeout is how long a new worker has to answer the
	// handshake. A worker that has not answered by then (its main is busy
	// before it calls Init, say) is killed, the failure is reported in
	// Run's error, and its place is not filled again.
	defaultStartTimeout = 30 * time.Second
	// stopTimeout is how long Run waits for workers asked to stop (which
	// run the cleanups of their cached items) before it kills them.
	stopTimeout = 30 * time.Second
	// terminateGrace is how long a worker told to stop now (SIGTERM) has
	// before it is killed.
	terminateGrace = 2 * time.Second
)

// An Option configures a pool. Options whose argument is out of range
// panic, as every misuse of the package does (see [Pool]).
type Option func(*config)

type config struct {
	joiners      []func(ctx context.Context, p enginehost.Pool) // enginehost.Engine.Joiner
	remoteOnly   time.Duration                                  // > 0: no local worker; the longest wait without any (RemoteOnly)
	workers      int
	inProcess    bool // the workers are goroutines (InProcess)
	failFast     bool
	capacity     int
	listener     func(Event)
	tick         time.Duration
	evict        EvictPolicy
	startTimeout time.Duration
	affinity     bool
	budget       int64
	idleEvict    bool
	maxValue     int
	retries      int
	timeout      time.Duration
	grace        time.Duration
	limit        Resources // Capacity
	names        []string  // the named resources of limit, sorted
	named        []int64   // their limits, in that order
	silence      time.Duration
	items        itemsMode // what workers do of undeclared items (LearnItems, StrictItems)
	// transport, when set, makes the pool's transport instead of the pipe
	// transport, and says how many workers to start (others may join).
	transport func(capacity int, params workerParams, out chan<- msg) (tr transport, start int)
	// output is where what the workers print goes (WorkerOutput).
	output workerOutput
}

func defaultConfig() config {
	return config{
		workers:      runtime.NumCPU(),
		capacity:     shm.DefaultCapacity,
		startTimeout: defaultStartTimeout,
		affinity:     true,
		idleEvict:    true,
		maxValue:     DefaultMaxValueSize,
		grace:        defaultCancelGrace,
		silence:      defaultSilenceLimit,
	}
}

// Workers sets the most worker processes the pool runs at once (default
// [runtime.NumCPU]). They start as the jobs need them, not all when Run
// starts: the pool starts one more worker for each job that is Queued
// (its dependencies are met) beyond the workers that are starting or
// free, up to n. So Workers(200) with one job starts one worker, and a
// graph that widens, as jobs finish and release their dependents or as
// schedulers queue more, gets more workers as it does. A worker that has
// started serves until the pool ends, and is replaced if it dies (see
// [ErrCrashLoop] for the exceptions). Zero runs the
// jobs serially in this process, in one worker there from the start, with
// the same statuses, events, window and cache eviction as with workers.
// Negative n panics.
func Workers(n int) Option {
	if n < 0 {
		panic(fmt.Sprintf("engine: Workers(%d): negative", n))
	}
	return func(c *config) { c.workers, c.inProcess = n, false }
}

// InProcess makes the pool's workers, at most n, goroutines of this
// process rather than worker processes, started as the jobs need them as
// [Workers] starts processes: each serves its jobs one at a time, with a
// cache of its own, the same statuses, events, window and cache eviction
// as a worker process; InProcess(1) is [Workers](0). It suits jobs that spend
// their time waiting on something else (other processes, the network),
// for which a worker process would only relay them: a job's argument and
// result still cross as encoded values, but no process sits between the
// pool and the job. What it loses is the isolation of processes: a job
// that crashes the process (os.Exit, a fatal error) ends the pool, the
// workers' items share this process's memory (its limit, its collector),
// and a job that ignores the end of its context cannot be killed: it is
// abandoned after the grace period, and a new goroutine takes its place.
// n < 1 panics; the last of Workers and InProcess counts.
func InProcess(n int) Option {
	if n < 1 {
		panic(fmt.Sprintf("engine: InProcess(%d): want at least one worker", n))
	}
	return func(c *config) { c.workers, c.inProcess = n, true }
}

// FailFast makes the first failure (a job that fails or is aborted, or a
// scheduler's error) end the pool: no job starts after it, every job that
// has not started is cancelled (its error wraps [ErrFailFast]), running jobs
// finish, and Run returns. A job that fails with a retry left (see
// [RetryFailures]) is not a failure yet. So that no job starts once a
// failure is known, a worker is sent a job only when it runs none (no job
// is sent ahead of the one it runs): short jobs pay a round trip each.
func FailFast() Option { return func(c *config) { c.failFast = true } }

// WindowCapacity sets the number of slots of the pool's window (default
// [shm.DefaultCapacity]). More distinct required items than slots is safe:
// workers then keep everything until the set fits again. n < 1 panics; a
// capacity the system cannot map makes Run fail.
func WindowCapacity(n int) Option {
	if n < 1 {
		panic(fmt.Sprintf("engine: WindowCapacity(%d): fewer than one slot", n))
	}
	return func(c *config) { c.capacity = n }
}

// OnEvent adds a progress listener. Listeners are called from one goroutine,
// in the order of the events, never concurrently; a slow listener delays
// later events, not the pool. Run returns after the last event (the pool's
// PoolClosed) was delivered.
func OnEvent(fn func(Event)) Option {
	return func(c *config) {
		if prev := c.listener; prev != nil {
			c.listener = func(e Event) { prev(e); fn(e) }
		} else {
			c.listener = fn
		}
	}
}

// Tick makes the pool send an Event of kind [TickEvent] to its listeners
// whenever nothing else happened for d. Zero sends none; negative d panics.
func Tick(d time.Duration) Option {
	if d < 0 {
		panic(fmt.Sprintf("engine: Tick(%v): negative", d))
	}
	return func(c *config) { c.tick = d }
}

// Evict sets the pool's eviction policy (default [EvictStale]). Workers
// learn it in the handshake, so it applies in worker processes and in
// serial mode alike. An unknown policy panics.
func Evict(policy EvictPolicy) Option {
	if policy >= numPolicies {
		panic(fmt.Sprintf("engine: Evict(%d): unknown policy", uint8(policy)))
	}
	return func(c *config) { c.evict = policy }
}

// Affinity turns cache-affinity dispatch on or off (default on). With it, a
// free worker takes a ready job whose items it already holds, or failing
// that one whose items no other worker holds, rather than the oldest ready
// job, so that an item is built by fewer workers. The choice looks past
// the oldest ready job to the oldest jobs of at most 16 other sets of items,
// and the oldest ready job is passed over at most 64 times; then the next
// free worker takes it. A free worker whose only choice is a job whose
// items another worker holds waits instead, when that worker would run the
// group's ready jobs sooner than this one would build the items (by the
// workers' mean build time and the function's mean run time). Results are
// the same either way; only which worker runs a job, and when, changes.
func Affinity(on bool) Option { return func(c *config) { c.affinity = on } }

// workerParams are the parameters the pool's workers learn in the
// handshake.
func (c *config) workerParams() workerParams {
	return workerParams{policy: c.evict, budget: c.budget, idle: c.idleEvict, maxValue: int64(c.maxValue),
		heartbeat: c.silence / heartbeatsPerSilence, items: c.items}
}

// CacheBudget caps the bytes a worker's cache holds (as the items' Size
// functions report them; 0, the default, is no cap). When a build would
// take the worker past its budget, the worker first evicts items that the
// job at hand does not need: the one whose next use lies furthest ahead
// in the pool's queue first, and, among items no queued job needs yet, the
// least recently used. An evicted item is rebuilt if it is needed again. A
// job whose own items exceed the budget still runs, and an event of kind
// [BudgetExceeded] says so. Budget evictions are counted apart
// ([WorkerStats.BudgetEvicted]). Negative bytes panics.
func CacheBudget(bytes int64) Option {
	if bytes < 0 {
		panic(fmt.Sprintf("engine: CacheBudget(%d): negative", bytes))
	}
	return func(c *config) { c.budget = bytes }
}

// IdleEviction turns eviction while idle on or off (default on). With it,
// a worker waiting for its next job still follows its window: it sleeps
// on the window's generation (a futex on the shared mapping, woken by the
// parent after each publish) and evicts what the window no longer lists
// within about a millisecond, instead of at its next job or at the end of
// the pool. It applies with EvictStale and EvictPoolWide.
func IdleEviction(on bool) Option { return func(c *config) { c.idleEvict = on } }

// DefaultMaxValueSize is the default of [MaxValueSize]: 64 MiB.
const DefaultMaxValueSize = 64 << 20

// maxValueLimit is the largest MaxValueSize: a frame carries one value and
// a little more, and may not exceed maxFrame.
const maxValueLimit = maxFrame - 1<<20

// MaxValueSize bounds the encoded size of a job's argument and of its
// result (default [DefaultMaxValueSize]). A job whose argument encodes to
// more is Failed when it would run, and one whose result does is Failed
// when it returns, with an error wrapping [ErrTooLarge] that gives both
// sizes; the pool goes on. n must be from 1 byte to 1023 MiB, else
// MaxValueSize panics.
//
// Memory: the pool keeps a job's encoded argument until the job has
// ended (a retry sends it again), copies it into the frame that carries
// it, and holds the reply's frame while it decodes the result. While a
// job with a large argument and a result of the same size runs, the
// pool's process so holds some four times the value, the caller's own
// included; reckon with that when raising the limit.
func MaxValueSize(n int) Option {
	if n < 1 || n > maxValueLimit {
		panic(fmt.Sprintf("engine: MaxValueSize(%d): want 1 to %d bytes", n, maxValueLimit))
	}
	return func(c *config) { c.maxValue = n }
}

// Retries makes the pool run a job again, up to n more times, when its
// worker died under it (the job would be Aborted): the job goes back to
// the queue and a live worker takes it. A job that returned an error, or
// panicked, is not retried (it would fail again) unless it was queued with
// [RetryFailures]. Every attempt, with its
// worker and how it ended, is in [Job.Attempts] and in the events (a
// JobStatus event from Running back to Queued, with the death in Err and
// the attempt's number in Attempt). [JobRetries] sets it for one job.
// Default 0; negative n panics.
func Retries(n int) Option {
	if n < 0 {
		panic(fmt.Sprintf("engine: Retries(%d): negative", n))
	}
	return func(c *config) { c.retries = n }
}

// Timeout bounds the run time of every job (0, the default, is no bound;
// [JobTimeout] sets it for one job). A job past its time has its context
// cancelled and is Failed with an error wrapping
// [context.DeadlineExceeded], whatever it returns. If it has not returned
// within the grace period (5 s) its worker is killed, with the
// processes it started, and replaced. The time runs from when the job's
// worker starts it (as the pool sees it: when the worker has finished the
// job before it). Negative d panics.
func Timeout(d time.Duration) Option {
	if d < 0 {
		panic(fmt.Sprintf("engine: Timeout(%v): negative", d))
	}
	return func(c *config) { c.timeout = d }
}

// heartbeatsPerSilence is how many times per silence limit a busy worker
// says that it lives.
const heartbeatsPerSilence = 8

// Defaults of the fault handling, which only tests change
// (enginehost.Engine: CancelGrace, SilenceLimit).
const (
	// defaultCancelGrace is how long a job whose context was cancelled
	// (it timed out, or Job.Cancel was called while it ran) has to return
	// before its worker is killed and replaced.
	defaultCancelGrace = 5 * time.Second
	// defaultSilenceLimit bounds how long a worker that has jobs may say
	// nothing. A busy worker says it lives several times per limit, so a
	// worker silent for longer is stopped (SIGSTOP), stuck with its reply
	// pipe in disorder, or lost: it is killed, its job Aborted (or
	// retried) and its place filled. Time during which this process did
	// not run (it was stopped, the machine slept) does not count.
	defaultSilenceLimit = 30 * time.Second
)

// WorkerOutput sets where this process writes what the pool's workers
// print on their standard output and standard error (default [os.Stdout]
// and [os.Stderr]).
//
// Output is written in whole lines: each Write holds one or more complete
// lines, so the lines of several workers never mix. Two exceptions: a line
// longer than 64 KiB may come in pieces of that size, and an unfinished
// last line comes as it is when the worker ends. A worker process's output
// comes through a pipe per stream; in serial mode, what a job writes to
// the writers of [JobOutput] comes the same way.
//
// Writes come from several goroutines at once, one per worker and stream:
// stdout and stderr must be safe for concurrent use, and should not block
// for long, since a worker that prints waits for them. Every write has
// been made when Run returns, but those of a serial job that the pool
// gave up waiting for (see [Timeout]). Once a worker process has
// ended, the pool waits a quarter of a second for the end of its output
// (processes it left behind may hold its pipes), then passes on what its
// pipes hold and no more. A nil writer panics.
func WorkerOutput(stdout, stderr io.Writer) Option {
	if stdout == nil || stderr == nil {
		panic("engine: WorkerOutput with a nil writer")
	}
	return func(c *config) { c.output = workerOutput{stdout: stdout, stderr: stderr} }
}

// RemoteOnly makes a pool that starts no worker of its own: every worker
// joins from elsewhere (package github.com/poolrun/poolrun/cluster). While the pool has jobs left and no live
// worker, for longer than wait (from the start, or since the last worker
// left), Run fails with an error wrapping [ErrNoWorkers]. wait <= 0
// panics.
func RemoteOnly(wait time.Duration) Option {
	if wait <= 0 {
		panic("engine: RemoteOnly with a wait of 0 or less")
	}
	return func(c *config) { c.remoteOnly = wait }
}
