// Package enginehost is the door between package engine and the packages
// of this module that extend it (cluster) or test it. It holds what they
// share, so that engine's own API stays what a program that runs pools
// needs.
//
// Engine registers its half at initialisation ([Register]); the others
// take it with [Get]. A package that imports engine can call Get at any
// time, since engine's initialisation runs first.
package enginehost

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/poolrun/poolrun/shm"
)

// ProtocolVersion is the version of the protocol between a pool and its
// workers (engine/PROTOCOL.md) that this build speaks.
const ProtocolVersion = 11

// A WindowPublisher is the pool's side of a worker's window.
//
// Only the pool's scheduler publishes, one publish at a time, and never
// while it holds the pool's lock. So Publish may take as long as its
// transport needs (a network round trip, say) without holding up Queue,
// Stats or Cancel.
type WindowPublisher interface {
	// Publish replaces the set of required keys. It reports whether the
	// set holds more keys than the window has room for; the window then
	// says "keep everything".
	Publish(keys []uint64) (over bool)
	// Gen is the window's generation. It grows with every Publish that
	// changes the set. A job sent with generation g must not run on an
	// older view of the window.
	Gen() uint64
	// Publishes counts the publishes that changed the set.
	Publishes() uint64
	// Close releases the window. Gen and Publishes keep their last
	// figures.
	Close()
}

// A RemoteWorker is a worker the pool did not start, as its transport
// hands it to [Pool.Admit]: the streams of the pipe protocol, and the
// window it reads.
type RemoteWorker struct {
	Jobs io.WriteCloser // frames to the worker
	// Control carries cancels and revokes to the worker. The pool writes
	// these frames of a few bytes from its scheduler, holding its lock.
	// So Write must not wait for the worker or the network: queue the
	// frame, as a pipe's buffer does. A write that fails is dropped; the
	// worker's end shows on Replies.
	Control io.WriteCloser
	Replies io.ReadCloser // frames from the worker
	Window  WindowPublisher
	// Host is the name of the worker's host, as the worker said it, for
	// the pool's figures (engine.WorkerStats.Host); "" is unknown.
	Host string
	// Kill, if set, ends the worker and what its job started at once. The
	// pool calls it where it would kill a worker process of its own: a
	// job past its timeout, a cancel not heeded, a silent worker. Without
	// it the pool closes the streams, and a worker stuck in a job goes on
	// with it.
	Kill func()
	// Stdout and Stderr, if not nil, are what the worker prints, as its
	// transport brings it. The pool writes them to its engine.WorkerOutput
	// writers in whole lines until they end. Once Replies has ended, the
	// pool waits a quarter of a second for their end, then closes them.
	// Nil: what the worker prints stays where it runs.
	Stdout, Stderr io.ReadCloser
}

// A Pool is a running pool as a transport's joiner sees it.
type Pool interface {
	// Admit adds w to the running pool. The pool sends it the handshake;
	// once the worker answers, it gets jobs like any other. When its
	// streams end, its running job is Aborted (or run again) and its
	// place removed; it is not replaced. Admit fails when the pool is not
	// running.
	Admit(w RemoteWorker) error
	// WindowCapacity is the number of slots of the pool's windows
	// (engine.WindowCapacity).
	WindowCapacity() int
}

// A WorkerProcess is a worker process of this program, started for a pool
// that runs elsewhere. Its starter (cluster's host agent) relays the
// pool's frames to it and its frames back, and publishes the pool's sets
// in its window. It is the very process a pool starts for engine.Workers:
// same protocol, cache and process group.
type WorkerProcess interface {
	// Lease lets the commands of the worker's jobs run until until. Once
	// it has had a lease, the worker stops (SIGSTOP) the processes that
	// spawn.OwnerEnv marks as its own when its latest lease ends, and
	// continues them (SIGCONT) when a later one comes. A starter that
	// renews the lease only while the jobs are its to run so has them stop
	// when it cannot act: stopped, hung, cut off. When the starter dies,
	// the worker kills them. Lease never waits: a lease that does not fit
	// in the pipe is dropped. Leases are Linux's; elsewhere they do
	// nothing.
	Lease(until time.Time)
	// Jobs is the stream of frames to the worker (handshake, jobs, stop).
	Jobs() io.WriteCloser
	// Control is the stream of cancels and revokes to the worker.
	Control() io.WriteCloser
	// Replies is the stream of frames from the worker.
	Replies() io.ReadCloser
	// PID is the worker's process id.
	PID() int
	// Publish puts keys in the worker's window at generation gen, the
	// pool's generation of that set (even, above the last one published).
	// It reports whether the set overflowed the window; the worker then
	// keeps every item.
	Publish(keys []uint64, gen uint64) (over bool, err error)
	// Terminate asks the worker to leave its pool (SIGTERM), as a worker
	// of Serve whose context ends. It is killed if it has not gone after
	// grace (at once without).
	Terminate(grace time.Duration)
	// Wait waits for the worker's end, releases its window and says why
	// it ended: nil for a worker that exited with status 0 after the
	// pool's stop. A second call fails.
	Wait() error
}

// Engine is what package engine lends the others. O is engine.Option,
// which this package cannot name.
type Engine[O any] struct {
	// Joiner returns an option that runs join in a goroutine of its own
	// while the pool runs. Its context ends when the pool stops taking
	// jobs, before its workers are told to stop. Run waits for join to
	// return.
	Joiner func(join func(ctx context.Context, p Pool)) O
	// Fingerprint identifies this build as a pool's workers must match
	// it: a hash of the protocol version and the registered functions'
	// names.
	Fingerprint func() string
	// StartWorkerProcess starts a worker process whose window has
	// capacity slots. What it prints goes, in whole lines, to stdout and
	// stderr (os.Stdout and os.Stderr if nil). main must call engine.Init
	// first.
	StartWorkerProcess func(capacity int, stdout, stderr io.Writer) (WorkerProcess, error)
	// Serve serves a pool as a worker it did not start, in this process,
	// with a cache of its own and win as its window: the handshake on
	// jobs and replies, then every job, until the pool says stop or jobs
	// ends. Cancels and revokes come on control. What its jobs print goes
	// to stdout and stderr in whole lines (this process's if nil).
	//
	// When ctx ends, the worker leaves: it starts no other job, cancels
	// the running one's context (Aborted if it then returns an error),
	// clears its cache, says goodbye and returns nil. If jobs is an
	// io.Closer, Serve closes it then.
	Serve func(ctx context.Context, jobs io.Reader, replies io.Writer, control io.Reader, win *shm.Window, stdout, stderr io.Writer) error

	// Options for tests, which no program needs.

	// StartTimeout sets how long a new worker has to answer the handshake
	// (default 30 s).
	StartTimeout func(d time.Duration) O
	// CancelGrace sets how long a cancelled job has to return before its
	// worker is killed (default 5 s).
	CancelGrace func(d time.Duration) O
	// SilenceLimit bounds how long a worker that has jobs may say
	// nothing (default 30 s).
	SilenceLimit func(d time.Duration) O
}

var registered struct {
	sync.Once
	engine any // *Engine[engine.Option]
}

// Register makes e what [Get] returns. Package engine calls it once, at
// initialisation; a second call panics.
func Register[O any](e *Engine[O]) {
	done := false
	registered.Do(func() { registered.engine, done = e, true })
	if !done {
		panic("enginehost: Register called twice")
	}
}

// Get returns what package engine registered. O must be engine.Option;
// anything else panics, as does a call from a program that does not link
// engine.
func Get[O any]() *Engine[O] {
	e, ok := registered.engine.(*Engine[O])
	if !ok {
		panic("enginehost: Get before package engine registered, or with a type other than engine.Option")
	}
	return e
}
