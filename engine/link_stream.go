package engine

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// The stream link: a worker the pool did not start, reached through byte
// streams that its transport carries (package cluster: NATS subjects), and
// reading a window of that transport's making. The frames are those of a
// worker process (wire.go); the worker serves them with [Serve].

// A RemoteWorker is a worker the pool did not start, as its transport
// hands it to [Pool.Admit]: the streams of the pipe protocol, and the
// window it reads.
type RemoteWorker struct {
	Jobs io.WriteCloser // frames to the worker
	// Control carries cancels and revokes to the worker: frames of a few
	// bytes, which the pool writes from its scheduler, holding its lock.
	// Its Write must not wait for the worker or the network (queue the
	// frame, as a pipe's buffer does); a write that fails is dropped, as
	// the worker's end shows on Replies.
	Control io.WriteCloser
	Replies io.ReadCloser // frames from the worker
	Window  WindowPublisher
	// Host is the name of the worker's host, as the worker said it, for
	// the pool's figures ([WorkerStats.Host]); "" is unknown.
	Host string
	// Kill, if set, ends the worker at once, as the pool kills a worker
	// process of its own (a job past its timeout, a cancel not heeded,
	// a worker silent): its transport kills the process, and whatever
	// its job started. Without it the pool closes the streams, and a
	// worker stuck in a job goes on with it.
	Kill func()
	// Stdout and Stderr, if not nil, are what the worker prints, as its
	// transport brings it: the pool writes them to its [WorkerOutput]
	// writers in whole lines, as a worker process's output, until they
	// end. Once the worker's Replies have ended, the pool waits a quarter
	// of a second for their end, then closes them. Nil: what the worker
	// prints stays where it runs.
	Stdout, Stderr io.ReadCloser
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
	defer p.mu.Unlock()
	s := p.sched
	if s == nil || p.state != PoolRunning {
		return errors.New("engine: Admit: the pool is not running")
	}
	s.admitted[newStreamLink(w, p.cfg.workerParams(), p.cfg.output, s.msgs)] = true
	return nil
}

// streamLink is the scheduler's link to a worker over streams. It cannot
// kill its worker, only leave it: when its streams close, the worker sees
// them end and goes.
type streamLink struct {
	frameLink
	kill func()
}

// newStreamLink starts the conversation with w: the handshake, then what
// the worker says goes to out, with w's host and window in its hello;
// what it prints goes to output.
func newStreamLink(w RemoteWorker, params workerParams, output workerOutput, out chan<- msg) *streamLink {
	l := &streamLink{kill: w.Kill}
	l.init(l, w.Jobs, w.Control, w.Replies, params)
	l.begin(0)
	var copies []*readCopy
	if w.Stdout != nil {
		copies = append(copies, startReadCopy(w.Stdout, output.out()))
	}
	if w.Stderr != nil {
		copies = append(copies, startReadCopy(w.Stderr, output.err()))
	}
	go func() {
		err := l.read(out, hello{host: w.Host, win: w.Window})
		l.close()
		l.r.Close()
		// Nothing it printed comes after its end is reported.
		drained := time.Now().Add(outputDrain)
		for _, c := range copies {
			c.end(drained)
		}
		why := errors.New("its connection ended")
		if err != io.EOF {
			why = fmt.Errorf("its connection ended: %w", err)
		}
		out <- msg{from: l, died: why}
	}()
	return l
}

func (l *streamLink) pid() int { return 0 }

// terminate closes the streams, at once or after grace: the worker sees
// them end and goes; the link reports it gone when the replies end. At
// once, it kills the worker too, where its transport can.
func (l *streamLink) terminate(grace time.Duration) {
	leave := func() {
		l.close()
		l.r.Close()
	}
	if grace <= 0 {
		if l.kill != nil {
			l.kill()
		}
		leave()
	} else {
		time.AfterFunc(grace, leave)
	}
}
