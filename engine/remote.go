package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/shm"
)

// Workers the pool did not start: a transport across hosts (package
// cluster) carries the pipe transport's frames (PROTOCOL.md) over streams
// of its own, admits each worker that joins with [Pool.Admit], and has the
// worker serve with [Serve]; the window is one of its own too.

// Joiner runs f while the pool runs, in a goroutine of its own, from the
// start of the pool's run (its own workers start as its jobs need them,
// see [Workers]), with a context that ends when the
// pool stops taking jobs (before its workers are told to stop): a
// transport that admits workers joining from elsewhere listens in f, and
// calls [Pool.Admit] for each. Run waits for f to return.
func Joiner(f func(ctx context.Context, p *Pool)) Option {
	return func(c *config) { c.joiners = append(c.joiners, f) }
}

// RemoteOnly makes a pool that starts no worker of its own: every worker
// joins through a [Joiner]. While the pool has jobs left and no live
// worker, for longer than wait (from the start, or since the last worker
// left), Run fails with an error wrapping [ErrNoWorkers]. wait <= 0
// panics.
func RemoteOnly(wait time.Duration) Option {
	if wait <= 0 {
		panic("engine: RemoteOnly with a wait of 0 or less")
	}
	return func(c *config) { c.remoteOnly = wait }
}

// ErrNoWorkers is the error of a RemoteOnly pool that went without any
// worker for longer than its wait.
var ErrNoWorkers = errors.New("no worker")

// A WindowPublisher is the pool's side of a window that the engine does not
// make, for one admitted worker.
type WindowPublisher interface {
	// Publish replaces the set of required keys and reports whether it
	// holds more keys than the window has room for (the window then says
	// "keep everything").
	Publish(keys []uint64) (over bool)
	// Gen is the window's generation, which grows with every Publish that
	// changes the set: a job sent with generation g must not run on an
	// older view of the window.
	Gen() uint64
	// Publishes counts the publishes that changed the set.
	Publishes() uint64
	// Close releases the window; Gen and Publishes keep their last
	// figures.
	Close()
}

// A WindowReader is a worker's side of a window: the engine's own, in
// shared memory, or one a transport makes ([Serve]).
type WindowReader interface {
	// Gen returns the generation the worker can see now.
	Gen() uint64
	// Snapshot copies the set (into dst's room) with its generation.
	Snapshot(dst []uint64) (shm.Snapshot, error)
	// WaitGen waits until the generation is at least gen or deadline has
	// passed, and reports whether it got there. On false the worker keeps
	// every item: it cannot tell which are still needed.
	WaitGen(gen uint64, deadline time.Time) bool
	// WaitChange sleeps until the generation differs from after or
	// deadline has passed, and returns the generation.
	WaitChange(after uint64, deadline time.Time) uint64
}

// A RemoteWorker is a worker the pool did not start, as its transport
// hands it to [Pool.Admit]: the streams of the pipe protocol, and the
// window it reads.
type RemoteWorker struct {
	Jobs    io.WriteCloser // frames to the worker
	Control io.WriteCloser // cancels and revokes to the worker
	Replies io.ReadCloser  // frames from the worker
	Window  WindowPublisher
	// Host is the name of the worker's host, as the worker said it, for
	// the pool's figures ([WorkerStats.Host]); "" is unknown.
	Host string
}

// Admit adds w to the running pool: the pool sends it the handshake, and
// once the worker answers it has a place of its own and gets jobs like any
// other. When its streams end, its running job is Aborted (or run again,
// see [Retries]) and its place is removed; it is not replaced. Admit fails
// when the pool is not running.
func (p *Pool) Admit(w RemoteWorker) error {
	if w.Jobs == nil || w.Control == nil || w.Replies == nil || w.Window == nil {
		return errors.New("engine: Admit: a remote worker needs its three streams and its window")
	}
	p.mu.Lock()
	s, running := p.sched, p.state == PoolRunning
	p.mu.Unlock()
	if s == nil || !running {
		return errors.New("engine: Admit: the pool is not running")
	}
	l := newPipeLink(w.Jobs, w.Replies, p.cfg.workerParams())
	l.ctl = w.Control
	l.remote = true
	l.host = w.Host
	l.joinWin = remotePublisher{w.Window}
	l.begin(0, s.msgs)
	return nil
}

// remotePublisher is a WindowPublisher as the scheduler's publisher.
type remotePublisher struct{ w WindowPublisher }

func (r remotePublisher) publish(keys []uint64) bool { return r.w.Publish(keys) }
func (r remotePublisher) gen() uint64                { return r.w.Gen() }
func (r remotePublisher) publishes() uint64          { return r.w.Publishes() }
func (r remotePublisher) close() publisher {
	c := closedWindow{r.w.Gen(), r.w.Publishes()}
	r.w.Close()
	return c
}

// Serve serves a pool as a worker it did not start: the pipe protocol's
// handshake on jobs and replies, then every job the pool sends, until the
// pool says stop (the cache is cleared, its cleanups run) or the jobs
// stream ends, or ctx ends. Cancels and revokes come on control; win is
// the window the pool publishes for this worker. The jobs run with this
// process's default cache (cachepool.Default).
//
// When ctx ends (the worker's process was asked to stop, with SIGTERM
// say), the worker leaves the pool: it starts no other job; the job it
// runs, if any, has its context cancelled, and if it then returns an
// error rather than a value it is Aborted, as when a worker dies under
// its job (run again where the pool allows retries); the cache is cleared
// (the cleanups run), the worker says goodbye, so that the pool gives its
// other jobs to other workers at once, and Serve returns nil. If jobs is
// an io.Closer, Serve closes it then, to stop waiting for a job.
func Serve(ctx context.Context, jobs io.Reader, replies io.Writer, control io.Reader, win WindowReader) error {
	wc, params, err := acceptPipe(jobs, replies, control)
	if err != nil {
		return err
	}
	if c, ok := jobs.(io.Closer); ok {
		stop := context.AfterFunc(ctx, func() { c.Close() })
		defer stop()
	}
	cache := cachepool.Default()
	err = serve(ctx, wc, win, cache, params, true, new(atomic.Bool))
	if ctx.Err() == nil {
		return err
	}
	cache.Clear()
	return wc.bye(&byeInfo{stats: cache.Stats(), peakRSS: peakRSS()})
}

// WindowCapacity is the number of slots of the pool's windows
// ([WindowCapacity]): a transport that makes windows of its own for the
// workers it admits gives them as many.
func (p *Pool) WindowCapacity() int { return p.cfg.capacity }

// ProtocolVersion is the version of the protocol between a pool and its
// workers (PROTOCOL.md) that this build speaks.
const ProtocolVersion = protoVersion

// Fingerprint identifies this build as a pool's workers must match it: a
// hash of the protocol version and the names of the registered functions,
// in hexadecimal. A worker of another build would not find a job's
// function, or would read its frames otherwise.
func Fingerprint() string {
	registry.RLock()
	names := make([]string, 0, len(registry.funcs))
	for name := range registry.funcs {
		names = append(names, name)
	}
	registry.RUnlock()
	slices.Sort(names)
	h := xxhash.New()
	fmt.Fprintf(h, "poolrun protocol %d\n", protoVersion)
	for _, n := range names {
		h.WriteString(n)
		h.WriteString("\n")
	}
	return strconv.FormatUint(h.Sum64(), 16)
}
