package engine

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// The worker's side of the frames (wire.go), over a worker process's pipes
// or over the streams of a worker that joined a pool by itself
// (serveHosted, host.go).

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
	cur task // the task that next returned last

	mu  sync.Mutex
	out io.Writer
	e   enc
	err error // the write that failed
	job runningJob
	// timer says that job started once it has run for startedDelay. It is
	// armed by the first job of a stream and re-arms itself while jobs
	// run, rather than being reset for every job (see sayLate).
	timer *time.Timer
	armed bool // the timer will fire
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

// unsaid reports whether a job runs, or ran last, that the worker has not
// said started. w.mu is held.
func (w *pipeWorker) unsaid() bool { return w.job.id != 0 && !w.job.said }

// sayStarted encodes that the unsaid job started ago. w.mu is held.
func (w *pipeWorker) sayStarted(ago time.Duration) {
	w.job.said = true
	w.e.started(w.job.id, ago)
}

// send encodes a frame with put and writes it with whatever was held
// (after saying that the running job started).
func (w *pipeWorker) send(put func(*enc)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.unsaid() {
		w.sayStarted(time.Since(w.job.at))
	}
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
			t := &w.cur
			err := d.task(t)
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
	if !w.armed {
		w.armed = true
		if w.timer == nil {
			w.timer = time.AfterFunc(startedDelay, w.sayLate)
		} else {
			w.timer.Reset(startedDelay)
		}
	}
	return w.err
}

// sayLate is the timer's: it says that the running job started if it has
// run for startedDelay, and otherwise waits for the rest of that time. A
// timer that finds no job running stops until the next job arms it.
func (w *pipeWorker) sayLate() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.unsaid() {
		w.armed = false
		return
	}
	ran := time.Since(w.job.at)
	if ran < startedDelay {
		w.timer.Reset(startedDelay - ran)
		return
	}
	w.armed = false
	w.sayStarted(ran)
	w.flush()
}

func (w *pipeWorker) done(r *reply) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.job.id == r.id && w.unsaid() {
		w.sayStarted(r.elapsed) // it began when the job did
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
