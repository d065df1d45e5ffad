package engine

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/poolrun/poolrun/internal/enginehost"
)

// The stream link: a worker the pool did not start, reached through byte
// streams that its transport carries (package cluster: NATS subjects), and
// reading a window of that transport's making. The frames are those of a
// worker process (wire.go); the worker serves them with serveHosted
// (host.go).

// admit adds w to the running pool (enginehost.Pool.Admit).
func (p *Pool) admit(w enginehost.RemoteWorker) error {
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
func newStreamLink(w enginehost.RemoteWorker, params workerParams, output workerOutput, out chan<- msg) *streamLink {
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
