package engine

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// frameLink is the parent's half of a conversation in frames (wire.go),
// shared by the links to a worker process and to a worker over streams.
// It encodes what it is given into frames that one goroutine writes, so
// the scheduler never waits for a full pipe or a slow stream. It writes
// cancels and revokes on the control stream. It reads the worker's frames
// into an inbox, which the scheduler pulls: the link kicks it once per
// pull, however many frames arrive meanwhile, and reuses the room of what
// it pulled the time before.
type frameLink struct {
	self   link // the link the messages come from
	w      io.WriteCloser
	ctl    io.WriteCloser // cancels and revokes
	r      io.ReadCloser
	params workerParams // the pool's, sent in the handshake; the answer must echo them
	ctlMu  sync.Mutex

	mu      sync.Mutex
	cond    *sync.Cond
	pending enc // frames not written yet
	closed  bool

	inMu   sync.Mutex
	inbox  []msg // what the worker said since the last pull, from the link
	kicked bool  // a kick (a msg that pulls) is on its way
	pulled pulled
}

func (f *frameLink) init(self link, w, ctl io.WriteCloser, r io.ReadCloser, params workerParams) {
	f.self, f.w, f.ctl, f.r, f.params = self, w, ctl, r, params
	f.cond = sync.NewCond(&f.mu)
}

// add puts n in the inbox, with the notes just before it. f.inMu is held.
func (f *frameLink) add(n note) {
	if k := len(f.inbox); k > 0 && f.inbox[k-1].notes != nil {
		f.inbox[k-1].notes = append(f.inbox[k-1].notes, n)
		return
	}
	f.inbox = append(f.inbox, msg{from: f.self, notes: append(f.pulled.batch(16), n)})
}

// addDone puts the reply r in the inbox: in the note of its job's start
// just before it, or in a note of its own. f.inMu is held.
func (f *frameLink) addDone(r *reply) {
	if !joinStart(f.inbox, r) {
		f.add(note{ended: true, done: *r})
	}
}

// pull takes what the worker said (from the scheduler's goroutine).
func (f *frameLink) pull() []msg {
	f.inMu.Lock()
	defer f.inMu.Unlock()
	ms := f.inbox
	f.inbox, f.kicked = f.pulled.swap(ms), false
	return ms
}

// begin queues the handshake and starts the writing goroutine.
func (f *frameLink) begin(index int) {
	f.mu.Lock()
	f.pending.hello(index, f.params)
	f.mu.Unlock()
	go f.writeLoop()
}

func (f *frameLink) send(tasks []task) {
	f.mu.Lock()
	for i := range tasks {
		f.pending.task(&tasks[i])
	}
	f.mu.Unlock()
	f.cond.Signal()
}

func (f *frameLink) stop() {
	f.mu.Lock()
	f.pending.stop()
	f.mu.Unlock()
	f.cond.Signal()
}

// cancel writes a cancel frame to the control stream, which the worker
// reads whether a job runs or not. A frame of a few bytes into a pipe that
// carries only such frames does not wait; a worker that has gone makes the
// write fail, and its end is reported anyway.
func (f *frameLink) cancel(id uint64) {
	var e enc
	e.cancel(id)
	f.control(e.b)
}

// revoke writes a revoke frame to the control stream, as cancel does.
func (f *frameLink) revoke(id, seq uint64) {
	var e enc
	e.revoke(id, seq)
	f.control(e.b)
}

func (f *frameLink) control(frame []byte) {
	f.ctlMu.Lock()
	f.ctl.Write(frame)
	f.ctlMu.Unlock()
}

// writeLoop writes what was queued until the link is closed or a write
// fails (the worker is gone: the reader will find out and report it); then
// it closes the streams to the worker.
func (f *frameLink) writeLoop() {
	var buf enc
	for {
		f.mu.Lock()
		for len(f.pending.b) == 0 && !f.closed {
			f.cond.Wait()
		}
		if f.closed {
			f.mu.Unlock()
			f.w.Close()
			f.ctlMu.Lock()
			f.ctl.Close()
			f.ctlMu.Unlock()
			return
		}
		buf, f.pending = f.pending, enc{b: buf.b[:0]}
		f.mu.Unlock()
		if _, err := f.w.Write(buf.b); err != nil {
			f.close()
		}
		if cap(buf.b) > keepBuffer {
			buf.b = nil // a large value's frames: let their memory go
		}
	}
}

// close stops the writing: the streams to the worker close.
func (f *frameLink) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.cond.Signal()
}

// read reads the worker's handshake, reports hi with the worker's pid, and
// then reports what the worker says, batching the notes that arrived
// together, until the stream ends or brings what the parent cannot follow.
func (f *frameLink) read(out chan<- msg, hi hello) error {
	fr := newFrameReader(f.r)
	pid, params, err := fr.hello()
	if err != nil {
		return err
	}
	if params != f.params {
		return fmt.Errorf("engine: protocol: the worker applies %+v, the pool asked for %+v", params, f.params)
	}
	hi.pid = int(pid)
	out <- msg{from: f.self, hello: &hi}
	kick := msg{from: f.self, pull: f.pull}
	// flush kicks the scheduler if it has something to pull, unless a kick
	// is on its way; m, if not nil, goes in the inbox first, after the
	// notes before it.
	flush := func(m *msg) {
		f.inMu.Lock()
		if m != nil {
			f.inbox = append(f.inbox, *m)
		}
		send := !f.kicked && len(f.inbox) > 0
		f.kicked = f.kicked || send
		f.inMu.Unlock()
		if send {
			out <- kick
		}
	}
	// now is when the frames in the reader's buffer arrived: the clock is
	// read once for the frames that came together.
	var now time.Time
	for {
		kind, d, err := fr.next()
		if err != nil {
			flush(nil)
			return err
		}
		switch kind {
		case frameStarted:
			id, ago, err := d.started()
			if err != nil {
				return err
			}
			if now.IsZero() {
				now = time.Now()
			}
			f.inMu.Lock()
			f.add(note{started: id, at: now.Add(-ago).UnixNano()})
			f.inMu.Unlock()
		case frameDone:
			var r reply
			if err := d.done(&r); err != nil {
				return err
			}
			f.inMu.Lock()
			f.addDone(&r)
			f.inMu.Unlock()
		case frameState:
			st, err := d.state()
			if err != nil {
				return err
			}
			flush(&msg{from: f.self, state: st})
		case frameBye:
			b, err := d.bye()
			if err != nil {
				return err
			}
			flush(&msg{from: f.self, bye: b})
		case frameAlive:
			flush(&msg{from: f.self, alive: true})
		default:
			return fmt.Errorf("engine: protocol: unexpected frame of kind %d from a worker", kind)
		}
		if !fr.buffered() {
			flush(nil) // nothing more has arrived: report what has
			now = time.Time{}
		}
	}
}
