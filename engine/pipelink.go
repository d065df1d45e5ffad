package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// pipeLink is the scheduler's link to a worker over its pipes: it
// encodes what it is given into frames, which one goroutine writes (so that
// the scheduler never blocks on a full pipe), and another goroutine reads
// the worker's frames and reports them as messages.
type pipeLink struct {
	w      io.WriteCloser
	r      io.ReadCloser
	ctl    io.WriteCloser // the control pipe: cancels and revokes
	params workerParams   // the pool's, sent in the handshake; the answer must echo them
	ctlMu  sync.Mutex

	cmd *exec.Cmd // nil in serial mode and for a remote worker
	// remote: a worker the pool did not start (Admit), reached through
	// streams only: it cannot be killed, only left.
	remote bool
	host   string // a remote worker's host name (RemoteWorker.Host)
	// The worker process's stdout and stderr, passed on; the stderr
	// copy keeps its tail.
	stdout, stderr *outputCopy
	// joinWin is the window of a worker that joins by itself (a test's
	// transport), told to the scheduler in its hello.
	joinWin publisher
	// serial mode: the serving goroutine's cancel and end; abandoned is
	// closed when the link stops waiting for a goroutine whose job does
	// not return (see terminate).
	stopLocal context.CancelFunc
	served    chan error
	abandon   sync.Once
	abandoned chan struct{}

	mu      sync.Mutex
	cond    *sync.Cond
	pending enc // frames not written yet
	closed  bool
	// direct: w never waits (a memPipe), so frames are written as they
	// are queued, by whoever queues them, and there is no writeLoop.
	direct  bool
	wClosed bool // direct: w (and ctl) closed
}

func newPipeLink(w io.WriteCloser, r io.ReadCloser, params workerParams) *pipeLink {
	l := &pipeLink{w: w, r: r, params: params}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// begin sends the handshake and starts the link's goroutines.
func (l *pipeLink) begin(index int, out chan<- msg) {
	l.mu.Lock()
	l.pending.hello(index, l.params)
	l.flushLocked()
	l.mu.Unlock()
	if !l.direct {
		go l.writeLoop()
	}
	go l.readLoop(out)
}

func (l *pipeLink) send(tasks []task) {
	l.mu.Lock()
	for i := range tasks {
		l.pending.task(&tasks[i])
	}
	l.flushLocked()
	l.mu.Unlock()
	l.cond.Signal()
}

// flushLocked writes the pending frames of a direct link (they are
// dropped once it is closed); without direct, writeLoop does.
func (l *pipeLink) flushLocked() {
	if !l.direct || len(l.pending.b) == 0 {
		return
	}
	if !l.closed {
		if _, err := l.w.Write(l.pending.b); err != nil {
			l.closed = true
		}
	}
	l.pending.b = l.pending.b[:0]
	l.closeDirectLocked()
}

// closeDirectLocked closes a direct link's writers once it is closed.
func (l *pipeLink) closeDirectLocked() {
	if !l.direct || !l.closed || l.wClosed {
		return
	}
	l.wClosed = true
	l.w.Close()
	if l.ctl != nil {
		l.ctlMu.Lock()
		l.ctl.Close()
		l.ctlMu.Unlock()
	}
}

func (l *pipeLink) pid() int {
	if l.cmd == nil {
		return os.Getpid()
	}
	return l.cmd.Process.Pid
}

// cancel writes a cancel frame to the control pipe, which the worker reads
// whether a job runs or not. A frame of a few bytes into a pipe that carries
// only such frames does not wait; a worker that has gone makes the write fail,
// and its end is reported anyway.
func (l *pipeLink) cancel(id uint64) {
	var e enc
	e.cancel(id)
	l.control(e.b)
}

// revoke writes a revoke frame to the control pipe, as cancel does.
func (l *pipeLink) revoke(id, seq uint64) {
	var e enc
	e.revoke(id, seq)
	l.control(e.b)
}

// control writes frame to the control pipe, if there is one.
func (l *pipeLink) control(frame []byte) {
	if l.ctl == nil {
		return
	}
	l.ctlMu.Lock()
	l.ctl.Write(frame)
	l.ctlMu.Unlock()
}

func (l *pipeLink) stop() {
	l.mu.Lock()
	l.pending.stop()
	l.flushLocked()
	l.mu.Unlock()
	l.cond.Signal()
}

func (l *pipeLink) terminate(grace time.Duration) {
	if l.remote {
		// Its streams close (at once, or after grace): the worker sees
		// them end and goes; the link reports it gone when the replies
		// end.
		leave := func() {
			l.close()
			l.r.Close()
		}
		if grace <= 0 {
			leave()
		} else {
			time.AfterFunc(grace, leave)
		}
		return
	}
	if l.cmd == nil {
		// A goroutine cannot be killed: its context is cancelled, and if
		// its job has not returned after grace, the link gives up on it
		// (it goes on, unheard, until its job returns).
		l.stopLocal()
		l.close()
		give := func() {
			l.abandon.Do(func() {
				close(l.abandoned)
				l.r.Close()
			})
		}
		if grace <= 0 {
			give()
		} else {
			time.AfterFunc(grace, give)
		}
		return
	}
	p := l.cmd.Process
	if grace <= 0 {
		p.Kill()
		return
	}
	p.Signal(syscall.SIGTERM)
	time.AfterFunc(grace, func() { p.Kill() })
}

// writeLoop writes what was queued until the link is closed or a write
// fails (the worker is gone: the reader will find out and report it).
func (l *pipeLink) writeLoop() {
	var buf enc
	for {
		l.mu.Lock()
		for len(l.pending.b) == 0 && !l.closed {
			l.cond.Wait()
		}
		if l.closed {
			l.mu.Unlock()
			l.w.Close()
			if l.ctl != nil {
				l.ctlMu.Lock()
				l.ctl.Close()
				l.ctlMu.Unlock()
			}
			return
		}
		buf, l.pending = l.pending, enc{b: buf.b[:0]}
		l.mu.Unlock()
		if _, err := l.w.Write(buf.b); err != nil {
			l.close()
		}
	}
}

func (l *pipeLink) close() {
	l.mu.Lock()
	l.closed = true
	l.closeDirectLocked()
	l.mu.Unlock()
	l.cond.Signal()
}

// readLoop reads the worker's frames and reports them, batching the replies
// that arrived together, until the stream ends; then it reports the end.
func (l *pipeLink) readLoop(out chan<- msg) {
	fr := newFrameReader(l.r)
	err := func() error {
		pid, params, err := fr.hello()
		if err != nil {
			return err
		}
		if params != l.params {
			return fmt.Errorf("engine: protocol: the worker applies %+v, the pool asked for %+v", params, l.params)
		}
		out <- msg{from: l, hello: &hello{pid: int(pid), host: l.host, win: l.joinWin}}
		var batch []*reply
		// flush reports the replies batched so far, then m (if any), in
		// the order the worker wrote them.
		flush := func(m *msg) {
			if len(batch) > 0 {
				out <- msg{from: l, replies: batch}
				batch = nil
			}
			if m != nil {
				out <- *m
			}
		}
		for {
			kind, d, err := fr.next()
			if err != nil {
				flush(nil)
				return err
			}
			switch kind {
			case frameDone:
				r, err := d.done()
				if err != nil {
					return err
				}
				batch = append(batch, r)
			case frameState:
				st, err := d.state()
				if err != nil {
					return err
				}
				flush(&msg{from: l, state: st})
			case frameBye:
				b, err := d.bye()
				if err != nil {
					return err
				}
				flush(&msg{from: l, bye: b})
			case frameAlive:
				flush(&msg{from: l, alive: true})
			default:
				return fmt.Errorf("engine: protocol: unexpected frame of kind %d from a worker", kind)
			}
			if !fr.buffered() {
				flush(nil) // nothing more has arrived: report what has
			}
		}
	}()
	if err != io.EOF && l.cmd != nil {
		// The worker said something this parent cannot follow: it is
		// lost whatever it does next.
		l.cmd.Process.Kill()
	}
	l.close()
	l.r.Close()
	why := l.wait(err)
	out <- msg{from: l, died: why, lastWords: l.stderr.last()}
}

// wait waits for the worker's end and describes it.
func (l *pipeLink) wait(readErr error) error {
	if l.remote {
		if readErr == nil || readErr == io.EOF {
			return errors.New("its connection ended")
		}
		return fmt.Errorf("its connection ended: %w", readErr)
	}
	if l.cmd == nil {
		select {
		case err := <-l.served:
			if err == nil {
				err = errors.New("worker goroutine ended")
			}
			return err
		case <-l.abandoned:
			return errors.New("abandoned: its job did not return when its context was cancelled")
		}
	}
	err := l.cmd.Wait()
	// Whatever the worker's jobs started and left running in its process
	// group ends with it (see workerSysProcAttr). The group's id is the
	// worker's pid, which no new process takes while the group has
	// members, and which was the worker's until just now.
	syscall.Kill(-l.cmd.Process.Pid, syscall.SIGKILL)
	// Nothing it printed comes after its end is reported.
	drained := time.Now().Add(outputDrain)
	l.stdout.end(drained)
	l.stderr.end(drained)
	if err == nil {
		if readErr != nil && readErr != io.EOF {
			return fmt.Errorf("exited with status 0 after %v", readErr)
		}
		return errors.New("exited with status 0")
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Errorf("killed by signal %v", ws.Signal())
		}
		return fmt.Errorf("exited with status %d", ee.ExitCode())
	}
	return err
}
