package engine

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
)

// pipeWorker is a worker's side of the pipes. The serve loop reads the
// parent's frames itself; a goroutine reads the control pipe, whose
// cancels reach the job they are for while it runs (or mark it, if it has
// not started). A revoke of a job frame not read yet (the worker counts
// the job frames it reads; a revoke names the frame's place) is answered
// at once, while a job may run, and the frame skipped when it is read; a
// revoke of a job read already does nothing: the job's reply says how it
// ended. Writes (done, state, alive, bye) are serialised: state and
// alive come from other goroutines than the serve loop's.
type pipeWorker struct {
	fr  *frameReader
	mu  sync.Mutex
	out io.Writer
	e   enc

	ctl struct {
		mu        sync.Mutex
		runID     uint64                  // the task that runs, or 0
		runCancel context.CancelCauseFunc // cancels its context
		early     map[uint64]bool         // cancels of tasks not started
		read      uint64                  // the job frames read
		revoked   map[uint64]bool         // job frames to skip, by place
	}
}

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
		if kind == frameRevoke {
			id, seq, err := d.revoke()
			if err != nil {
				return
			}
			w.ctl.mu.Lock()
			handBack := seq > w.ctl.read
			if handBack {
				if w.ctl.revoked == nil {
					w.ctl.revoked = map[uint64]bool{}
				}
				w.ctl.revoked[seq] = true
			}
			w.ctl.mu.Unlock()
			if handBack && w.done(&reply{id: id, outcome: outcomeRevoked}) != nil {
				return
			}
			continue
		}
		if kind != frameCancel {
			continue // nothing else comes this way
		}
		id, err := d.cancel()
		if err != nil {
			return
		}
		w.ctl.mu.Lock()
		if w.ctl.runID == id && w.ctl.runCancel != nil {
			w.ctl.runCancel(errParentCancelled)
		} else {
			if w.ctl.early == nil {
				w.ctl.early = map[uint64]bool{}
			}
			w.ctl.early[id] = true
		}
		w.ctl.mu.Unlock()
	}
}

// cancelledEarly reports, and forgets, a cancel of task id that came
// before the task started.
func (w *pipeWorker) cancelledEarly(id uint64) bool {
	w.ctl.mu.Lock()
	defer w.ctl.mu.Unlock()
	if w.ctl.early[id] {
		delete(w.ctl.early, id)
		return true
	}
	return false
}

// flush writes what was encoded. w.mu is held, or no other goroutine writes.
func (w *pipeWorker) flush() error {
	_, err := w.out.Write(w.e.b)
	w.e.b = w.e.b[:0]
	return err
}

func (w *pipeWorker) next() (*task, bool, error) {
	for {
		kind, d, err := w.fr.next()
		if err != nil {
			return nil, false, err
		}
		switch kind {
		case frameJob:
			w.ctl.mu.Lock()
			w.ctl.read++
			skip := w.ctl.revoked[w.ctl.read]
			delete(w.ctl.revoked, w.ctl.read)
			w.ctl.mu.Unlock()
			if skip {
				continue // handed back already
			}
			t, err := d.task()
			if err == nil {
				t.cancelled = w.cancelledEarly(t.id)
			}
			return t, false, err
		case frameStop:
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("engine: protocol: unexpected frame of kind %d from the parent", kind)
	}
}

func (w *pipeWorker) ready() bool { return w.fr.buffered() }

func (w *pipeWorker) running(id uint64, cancel context.CancelCauseFunc) {
	w.ctl.mu.Lock()
	w.ctl.runID, w.ctl.runCancel = id, cancel
	w.ctl.mu.Unlock()
	if id != 0 && w.cancelledEarly(id) {
		cancel(errParentCancelled) // came between next and now
	}
}

func (w *pipeWorker) done(r *reply) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.e.done(r)
	return w.flush()
}

func (w *pipeWorker) state(s *workerState) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.e.state(s)
	return w.flush()
}

func (w *pipeWorker) alive() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.e.alive()
	return w.flush()
}

func (w *pipeWorker) bye(b *byeInfo) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.e.bye(b)
	return w.flush()
}
