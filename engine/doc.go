// Package engine runs a graph of jobs on a pool of worker processes on one
// host, and keeps each worker's cache of expensive items (see
// [github.com/poolrun/poolrun/cachepool]) exactly as long as some unfinished
// job in the pool needs them.
//
// A complete program: an expensive item, a function whose jobs use it, a
// pool of worker processes (this same binary, re-executed), a hundred
// jobs, their results:
//
//	package main
//
//	import (
//		"context"
//		"fmt"
//		"log"
//
//		"github.com/poolrun/poolrun/cachepool"
//		"github.com/poolrun/poolrun/engine"
//	)
//
//	// Built once per worker that needs it; freed when no unfinished job does.
//	var table = cachepool.Define("table", func(ctx context.Context) ([]int, error) {
//		t := make([]int, 1000)
//		for i := range t {
//			t[i] = i * i
//		}
//		return t, nil
//	})
//
//	// Registered at package initialisation, so that workers find it by name.
//	var lookup = engine.Register("lookup", func(ctx context.Context, i int) (int, error) {
//		t, err := table.Get(ctx)
//		if err != nil {
//			return 0, err
//		}
//		return t[i], nil
//	}, engine.Uses(table)) // its jobs need table
//
//	func main() {
//		engine.Init() // first: in a worker process it serves jobs and exits
//		p := engine.New(engine.Workers(4))
//		args := make([]int, 100)
//		for i := range args {
//			args[i] = i
//		}
//		jobs := engine.Map(p, lookup, args) // or engine.Queue, one job at a time
//		if err := p.Run(context.Background()); err != nil {
//			log.Fatal(err)
//		}
//		v, _ := jobs[99].Result()
//		fmt.Println(v) // 9801
//	}
//
// ([RunMap] does New, Map, Run and the Results in one call.)
//
// A job that gets an item its function does not declare (no [Uses], no
// [Needs] on the job) still works. The pool learns the item from the job's
// reply and keeps it for the function's later jobs, as if the function
// declared it. It says on stderr, once per function and item, what to
// declare, with an event of kind [ItemLearned]. Until it has learned, the
// worker builds the item anew for every job. A member of a
// cachepool.Family, whose name varies from job to job, is not learned.
// [LearnItems] turns learning off; [StrictItems] makes such a job fail
// instead, for tests.
//
// # Functions, jobs and items
//
// A job calls a function registered by name at package initialisation with
// [Register], so that a worker process (the same binary, re-executed) finds
// it by that name. Arguments and results travel between processes as
// encoding/gob values, with cheaper ways for three kinds of types: a type
// that implements [encoding.BinaryMarshaler] and whose pointer implements
// [encoding.BinaryUnmarshaler] travels as the bytes of those methods; a
// bool, number, string or []byte type (named or not, without gob or binary
// methods of its own) as its value alone; a type of size zero as nothing.
// A value decodes as gob would decode it. A function may declare the cache
// items all its jobs need
// ([Uses]); a job may add more ([Needs]) and wait for others ([After]).
//
// # Life of a job
//
// A job is [Pending] until its dependencies have succeeded, then [Queued]
// until a worker takes it, then [Running], and [Succeeded] or [Failed]. It
// is [Cancelled] if it never ran (by [Job.Cancel], because a dependency did
// not succeed, by fail-fast, or because the pool was stopped) or was
// cancelled while it ran, [Aborted] if its worker died under it, and
// [Skipped] if it was queued with [Skip] (its work was done before: it
// does not run, and its dependents go on as after a success).
// Listeners ([OnEvent]) see every change, in order, from one goroutine,
// and each item a worker built or evicted, with its name, size, times and
// why it went ([ItemBuilt], [ItemEvicted], [EvictReason]).
//
// # Resources
//
// A pool with a [Capacity] runs at once only the jobs whose
// [JobResources] (slots, as a command's threads, bytes of memory, and
// amounts of resources known by name, such as GPUs or licences) fit in it
// together; a job larger than the capacity runs alone. A named resource
// that the capacity does not list has no limit. The oldest
// Queued job that does not fit holds back the younger ones until it
// does, so that it is not starved; the workers wait meanwhile.
//
// # Faults
//
// What a pool does when things go wrong, so that a crash, a stuck job or a
// lost worker gives a clear answer and loses nothing:
//
//   - A worker that dies is replaced; the job it ran is Aborted, or queued
//     again for another attempt with [Retries] or [JobRetries] (a job that
//     returned an error is not retried, unless queued with
//     [RetryFailures]: then a failed run, a timeout included, spends a
//     retry too, after a delay). [Job.Attempts] lists the runs;
//     [JobAttempt] tells a running job which run it is.
//     The processes the dead worker's jobs started, and left running in
//     its process group, are killed with it.
//   - [Timeout] and [JobTimeout] bound a job's run time: past it the job's
//     context is cancelled and the job Failed with a [*TimeoutError]
//     (wrapping [context.DeadlineExceeded]); if it has not returned 5 s
//     later, its worker is killed and replaced.
//   - [Job.Cancel] cancels a running job's context in the same way.
//   - A worker that has jobs and says nothing for 30 s (a busy worker
//     says it lives several times as often) is
//     killed and its job Aborted (or retried): a worker stopped with
//     SIGSTOP, or whose reply pipe a stray write broke, cannot hang a
//     pool. Without a timeout, a job that runs for ever while its worker
//     lives keeps the pool waiting: that is what Timeout is for.
//   - A main that does not call [Init] first is found at the first worker:
//     a worker process is this program re-executed, so it runs main again,
//     and when it reaches [New] it exits without a word. The pool starts no
//     other worker and Run fails at once with one error, which wraps
//     [ErrNoInit] and says that engine.Init() must be the first call in
//     main (and in TestMain), before anything else the program does.
//   - Workers that die without having run a job (before the handshake: the
//     program does not start, or exits before it reaches New; or after
//     it, while they had no job) are replaced, but five in a row stop the
//     pool from starting workers: Run's error wraps [ErrCrashLoop] and
//     quotes what the last one printed. The pool goes on with the workers
//     that serve, and ends when none is left. A worker that dies under a
//     job is not counted: the job is Aborted (or retried).
//   - A job whose argument or result encodes to more than [MaxValueSize]
//     fails with [ErrTooLarge]; the pool goes on.
//   - More distinct needed items than a window has slots is safe: the
//     workers then keep what they build until the set fits again, and
//     events of kinds [WindowOverflow] and [WindowFits] say so.
//
// # The window
//
// The parent counts, per item key, the jobs that need it: those not sent to
// a worker yet (Pending and Queued), and, per worker, those sent to it and
// not finished; a job's end costs time in proportion to its own items. Each
// worker has a window ([github.com/poolrun/poolrun/shm]), a shared mapping
// that it reads without asking, in which the parent publishes the keys that
// worker must keep: those of the jobs not sent yet and of its own jobs.
// Every job is sent stamped with its worker's window generation, published
// with the job's own keys in it; before it runs, the worker takes a
// snapshot at least that new and evicts from its cache every item the
// snapshot does not list. So an item stays on a worker exactly while a job
// it will run, or a job nobody runs yet, needs it; jobs running on other
// workers do not hold it there. A worker waiting for its next job sleeps on
// its window's generation (a futex) and evicts within about a millisecond
// of a publish ([IdleEviction]). At the end of the pool every worker clears
// its cache, running the items' cleanups, before it exits. After evictions
// that freed more than 16 MiB, a worker process makes the Go runtime return
// the memory to the system at once.
//
// That is the default policy, [EvictStale]. For comparison, [Evict] selects
// another on the same path: [EvictPoolWide] (BSB's rule: one window for the
// pool that lists every unfinished job's items, so every worker keeps an
// item while any worker still needs it), [EvictNever] keeps every item
// until the end of the pool (as a sync.Once would), [EvictEachJob] clears
// the cache after every job. [CacheBudget] caps what a worker's cache
// holds. The package github.com/poolrun/poolrun/bench measures them.
//
// # Workers
//
// [Workers](n) runs up to n worker processes, started as the jobs need
// them (one more for each ready job that no starting or free worker will
// take); Workers(0) runs the very same loop
// serially in a goroutine of this process, with the same statuses, events,
// window and eviction, and [InProcess](n) in n goroutines at once, each
// with a cache of its own, for jobs that wait on other processes. A worker whose process dies is replaced, even one
// that dies at start; the job it was running is Aborted with
// [ErrWorkerDied] (see Faults). A worker exits on its own
// when its parent dies. Among the jobs whose dependencies are met, the one
// queued first starts first, except that a free worker prefers a job whose
// items it already holds, or whose items no other worker holds, and may
// wait rather than build again items a busy worker holds when that worker
// will be done with their jobs sooner ([Affinity], with its bounds). Short
// jobs are streamed to a worker a few at a time so that it rarely waits for
// a round trip; long ones go one at a time to whichever worker is free.
//
// # Transports
//
// The scheduler knows a worker only as a link: a small interface that
// takes typed messages and never blocks on the worker. What every worker
// says comes back on one channel. Three links implement it, none a mode of
// another:
//
//   - a worker process over OS pipes ([Workers]), whose messages travel as
//     frames;
//   - a worker on another host, over byte streams that package
//     github.com/poolrun/poolrun/cluster carries, with the same frames;
//   - a goroutine of this process (Workers(0), [InProcess]), handed typed
//     tasks in a queue, with nothing encoded but the jobs' values.
//
// The pool publishes the windows without holding its lock. So a publish
// that crosses a network holds up neither [Queue], [Pool.Stats] nor
// [Job.Cancel]. What package cluster needs of the engine (admitting a
// worker, starting a worker process for a pool elsewhere, serving a pool
// from a goroutine) is not part of this API: it goes through an internal
// package of the module.
//
// A job is Running once it has been sent to a worker: a worker that is
// sent short jobs ahead runs them one after the other, and says when each
// begins ([JobStarted], [Job.Started]).
//
// The wire protocol between the parent and its workers is described in
// PROTOCOL.md beside this file. Only the message of a job function's error
// crosses it: errors returned by jobs are [*RemoteError]s (in serial mode
// too, so that both modes behave alike), and panics are [*PanicError]s.
//
// # Misuse
//
// Misuse is a programming error and panics with a message that begins
// "engine: " (a second [Pool.Run], [Pool.Go] after Run returned, an option
// out of range, registering a name twice); what goes wrong while a pool
// runs is an error.
package engine

// The files of this package, one concern each.
//
// The API:
//   - options.go: pool options; RemoteOnly.
//   - registry.go: registered functions, the build's fingerprint.
//   - job.go: Queue, Job and its options.
//   - pool.go: Pool, New, Go, Run.
//   - status.go, events.go, stats.go, errors.go.
//   - policy.go: eviction policies.
//   - output.go: what workers and jobs print.
//   - mapjobs.go: Map, RunMap.
//   - resources.go: JobResources, Capacity.
//   - retryfail.go: RetryFailures.
//   - learn.go: LearnItems, StrictItems, and the learning of undeclared
//     items on both sides.
//
// The scheduler:
//   - graph.go: the job graph and the per-key reference counts.
//   - queue.go: the ready queue.
//   - scheduler.go: its state and loop.
//   - rounds.go: collecting and delivering the windows' sets and the
//     round's jobs.
//   - dispatch.go: which worker takes a Queued job; rebalancing by
//     revokes.
//   - affinity.go: which ready job a free worker takes; eviction order
//     under a budget.
//   - replies.go: what workers say; the end of a run.
//   - health.go: timeouts, cancels, silence, deaths, the crash loop.
//   - places.go: worker places, starts and handshakes.
//   - placesets.go: the sets of places the scheduler keeps up to date, so
//     that its work follows what changed.
//   - cachebytes.go: the figures of cached and stale bytes.
//   - items.go: the workers' item journals and the item events.
//
// The seam:
//   - transport.go: the transport and link interfaces, the messages.
//   - window.go: the window interfaces and the shared-memory window.
//
// The links:
//   - link_process.go: worker processes over pipes.
//   - link_stream.go: workers over streams (admit).
//   - link_local.go: goroutines.
//   - workerprocess.go: a worker process started for a pool elsewhere.
//   - framelink.go: the parent's half of the frames, shared by the first
//     two.
//   - wire.go, wiredecode.go: the frames; codec.go: job values.
//   - proc_linux.go, proc_other.go: how a worker process is started.
//   - lease_linux.go, lease_other.go: a worker process's lease from its
//     starter.
//
// The worker:
//   - process.go: Init, a worker process's life.
//   - pipeworker.go: the worker's half of the frames.
//   - jobcontrol.go: cancels and revokes while a job runs.
//   - serve.go: the serve loop.
//   - evict.go: the window's evictions, the budget, idle eviction.
//
// The door: host.go registers with internal/enginehost what package
// cluster and other packages' tests take from the engine (the joiner,
// worker processes for a pool elsewhere, serving from a goroutine, the
// options only tests set).
