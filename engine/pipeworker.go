package engine

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/poolrun/poolrun/cachepool"
)

// The worker's side of the frames (wire.go), over a worker process's pipes
// or over the streams of a worker that joined a pool by itself ([Serve]).

// pipeWorker is a worker's side of the frames. The serve loop reads the
// parent's frames itself; a goroutine reads the control stream, whose
// cancels and revokes go to ctl. Writes (started, done, state, alive, bye)
// are serialised: state and alive come from other goroutines than the
// serve loop's.
//
// A worker says that a job started with its reply, or once it has run for
// startedDelay (the frame says how long ago it began), so that a short job
// costs one write, and over a network one message. It writes each reply
// before it starts the next job: a reply it held would be lost with the
// worker, and the pool would blame its death on a job that had returned.
type pipeWorker struct {
	fr  *frameReader
	ctl jobControl

	mu    sync.Mutex
	out   io.Writer
	e     enc
	err   error // the write that failed
	job   runningJob
	timer *time.Timer // says that job started, after startedDelay
}

// runningJob is the job a worker runs, or ran last, and whether it has
// said so.
type runningJob struct {
	id   uint64
	at   time.Time
	said bool
}

// startedDelay is how long a job runs before its worker says that it
// started, if it has not returned.
const startedDelay = 2 * time.Millisecond

// acceptPipe answers the parent's handshake on a worker's pipes and returns
// the worker's side of them and the pool's parameters for workers. ctl,
// if not nil, is the control pipe.
func acceptPipe(in io.Reader, out io.Writer, ctl io.Reader) (*pipeWorker, workerParams, error) {
	w := &pipeWorker{fr: newFrameReader(in), out: out}
	_, params, err := w.fr.hello()
	if err != nil {
		return nil, params, err
	}
	w.e.hello(os.Getpid(), params)
	if err := w.flush(); err != nil {
		return nil, params, err
	}
	if ctl != nil {
		go w.readControl(ctl)
	}
	return w, params, nil
}

// readControl reads cancels and revokes until the control pipe ends (or
// brings a frame it cannot decode); it skips frames of other kinds.
func (w *pipeWorker) readControl(r io.Reader) {
	fr := newFrameReader(r)
	for {
		kind, d, err := fr.next()
		if err != nil {
			return
		}
		switch kind {
		case frameRevoke:
			id, seq, err := d.revoke()
			if err != nil {
				return
			}
			if w.ctl.revoke(seq) && w.send(func(e *enc) { e.done(&reply{id: id, outcome: outcomeRevoked}) }) != nil {
				return
			}
		case frameCancel:
			id, err := d.cancel()
			if err != nil {
				return
			}
			w.ctl.cancel(id)
		}
	}
}

// flush writes what was encoded. w.mu is held, or no other goroutine
// writes.
func (w *pipeWorker) flush() error {
	if w.err != nil || len(w.e.b) == 0 {
		return w.err
	}
	_, w.err = w.out.Write(w.e.b)
	w.e.b = w.e.b[:0]
	return w.err
}

// sayStarted encodes that the running job started, once. w.mu is held.
func (w *pipeWorker) sayStarted() {
	if w.job.id != 0 && !w.job.said {
		w.job.said = true
		w.e.started(w.job.id, time.Since(w.job.at))
	}
}

// send encodes a frame with put and writes it with whatever was held
// (after saying that the running job started).
func (w *pipeWorker) send(put func(*enc)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sayStarted()
	put(&w.e)
	return w.flush()
}

// release writes what is encoded and not written yet.
func (w *pipeWorker) release() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flush()
}

func (w *pipeWorker) next() (*task, bool, error) {
	for {
		kind, d, err := w.fr.next()
		if err != nil {
			return nil, false, err
		}
		switch kind {
		case frameJob:
			if w.ctl.take() {
				continue // handed back already
			}
			t, err := d.task()
			if err == nil {
				t.cancelled = w.ctl.cancelledEarly(t.id)
			}
			return t, false, err
		case frameStop:
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("engine: protocol: unexpected frame of kind %d from the parent", kind)
	}
}

func (w *pipeWorker) ready() bool { return w.fr.buffered() }

func (w *pipeWorker) control() *jobControl { return &w.ctl }

func (w *pipeWorker) running(id uint64, cancel context.CancelCauseFunc) {
	w.ctl.running(id, cancel)
}

// started notes that job id began at; the worker says so with its reply,
// or after startedDelay if it runs that long.
func (w *pipeWorker) started(id uint64, at time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.job = runningJob{id: id, at: at}
	if w.timer == nil {
		w.timer = time.AfterFunc(startedDelay, func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.job.id != 0 && !w.job.said {
				w.sayStarted()
				w.flush()
			}
		})
	} else {
		w.timer.Reset(startedDelay)
	}
	return w.err
}

func (w *pipeWorker) done(r *reply) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.job.id == r.id {
		w.sayStarted()
	}
	w.e.done(r)
	return w.flush()
}

func (w *pipeWorker) state(s *workerState) error {
	return w.send(func(e *enc) { e.state(s) })
}

func (w *pipeWorker) alive() error {
	return w.send(func(e *enc) { e.alive() })
}

func (w *pipeWorker) bye(b *byeInfo) error {
	return w.send(func(e *enc) { e.bye(b) })
}

// A ServeOption is an option of [Serve].
type ServeOption func(*serveConfig)

type serveConfig struct {
	ownCache bool
	output   *jobOutput // nil: os.Stdout and os.Stderr
}

// OwnCache makes the worker's jobs use a cache of their own rather than
// this process's default cache, as the goroutine workers of [InProcess]
// do: for a process that serves several workers with Serve, each then
// holding its items apart, as the pool's scheduler assumes.
func OwnCache() ServeOption {
	return func(c *serveConfig) { c.ownCache = true }
}

// ServeOutput makes what the worker's jobs print through [JobOutput] go
// to stdout and stderr, in whole lines (as [WorkerOutput] says), rather
// than to this process's os.Stdout and os.Stderr: for a process that
// serves several workers with Serve and passes their output on (package
// cluster's agent, to the pool). A nil writer panics.
func ServeOutput(stdout, stderr io.Writer) ServeOption {
	if stdout == nil || stderr == nil {
		panic("engine: ServeOutput with a nil writer")
	}
	return func(c *serveConfig) {
		c.output = &jobOutput{stdout: newLineWriter(stdout), stderr: newLineWriter(stderr)}
	}
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
func Serve(ctx context.Context, jobs io.Reader, replies io.Writer, control io.Reader, win WindowReader, opts ...ServeOption) error {
	var cfg serveConfig
	for _, o := range opts {
		o(&cfg)
	}
	wc, params, err := acceptPipe(jobs, replies, control)
	if err != nil {
		return err
	}
	if c, ok := jobs.(io.Closer); ok {
		stop := context.AfterFunc(ctx, func() { c.Close() })
		defer stop()
	}
	if o := cfg.output; o != nil {
		ctx = context.WithValue(ctx, jobOutputKey{}, o)
		defer o.stderr.flush()
		defer o.stdout.flush()
	}
	cache, heap := cachepool.Default(), ownHeap
	if cfg.ownCache {
		cache, heap = cachepool.New(), sharedHeap
	}
	err = serve(ctx, wc, win, cache, params, heap, new(atomic.Bool))
	if ctx.Err() == nil {
		return err
	}
	cache.Clear()
	return wc.bye(&byeInfo{stats: cache.Stats(), peakRSS: peakRSS()})
}
