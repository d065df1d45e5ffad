package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/internal/spawn"
	"github.com/poolrun/poolrun/shm"
)

// The pipe transport: a worker is a process (this binary, re-executed) or,
// in serial mode, a goroutine of this process, and its messages travel as
// frames (wire.go) over three pipes: jobs, replies and control.
// PROTOCOL.md describes the conversation.

// The descriptors a worker process inherits, after stdin, stdout and
// stderr.
const (
	fdWindow  = 3 // the window, read-only
	fdJobs    = 4 // frames from the parent
	fdReply   = 5 // frames to the parent
	fdControl = 6 // cancels and revokes from the parent, read all along
)

// pipeTransport starts workers as processes, or as goroutines of this
// process (local: serial mode, InProcess), each with a cache of its own.
// Their windows are in shared memory.
type pipeTransport struct {
	capacity int
	params   workerParams
	out      chan<- msg
	local    bool
	output   workerOutput // where what the workers print goes

	mu     sync.Mutex
	caches map[int]*cachepool.Cache // local: by place index
}

func newProcessTransport(capacity int, params workerParams, out chan<- msg) *pipeTransport {
	return &pipeTransport{capacity: capacity, params: params, out: out}
}

// newLocalTransport makes the transport of serial mode and of InProcess:
// its workers are goroutines of this process.
func newLocalTransport(capacity int, params workerParams, out chan<- msg) *pipeTransport {
	return &pipeTransport{capacity: capacity, params: params, out: out, local: true, caches: map[int]*cachepool.Cache{}}
}

// cache returns the cache of the local worker of place index: the same
// for the worker that takes the place of one abandoned (see
// abandonGrace), which may still run its job.
func (t *pipeTransport) cache(index int) *cachepool.Cache {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.caches[index]
	if c == nil {
		c = cachepool.New()
		t.caches[index] = c
	}
	return c
}

// withOutput makes the workers' output go to o (see WorkerOutput).
func (t *pipeTransport) withOutput(o workerOutput) *pipeTransport {
	t.output = o
	return t
}

func (t *pipeTransport) newWindow() (publisher, error) {
	w, err := shm.Create(t.capacity)
	if err != nil {
		return nil, fmt.Errorf("engine: creating a window: %w", err)
	}
	return shmPublisher{w}, nil
}

func (t *pipeTransport) start(index int, win publisher) (link, error) {
	w := win.(shmPublisher).w
	if t.local {
		return t.startLocal(index, w)
	}
	return t.startProcess(index, w)
}

func (t *pipeTransport) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.caches {
		c.Clear()
	}
}

// startProcess starts a worker process for place index, from the spawning
// thread (see internal/spawn), with its link's goroutines.
func (t *pipeTransport) startProcess(index int, win *shm.Window) (link, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("engine: finding this program to start workers: %w", err)
	}
	// The parent's ends are non-blocking (its goroutines wait in the network
	// poller, holding no thread); exec hands the worker its ends in blocking
	// mode, which suits a process that does one thing at a time.
	lp, err := makePipes(true)
	if err != nil {
		return nil, err
	}
	setPipeSize(lp.jobsW)
	setPipeSize(lp.repW)

	cmd := exec.Command(exe)
	cmd.Args = append([]string{os.Args[0]}, os.Args[1:]...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", WorkerEnv, protoVersion))
	cmd.Stdin = nil
	// The worker's output passes through this process, in whole lines
	// (output.go), which also keeps the last lines of its stderr: what a
	// worker that died said last goes in the error of a crash loop.
	cmd.Stdout = lp.outW
	cmd.Stderr = lp.errW
	cmd.ExtraFiles = []*os.File{win.File(), lp.jobsR, lp.repW, lp.ctlR} // fds 3, 4, 5, 6
	cmd.SysProcAttr = workerSysProcAttr()
	err = spawn.Start(cmd)
	lp.closeWorkers()
	if err != nil {
		lp.closeParents()
		return nil, fmt.Errorf("engine: starting worker %d: %w", index, err)
	}
	l := newPipeLink(lp.jobsW, lp.repR, t.params)
	l.ctl = lp.ctlW
	l.cmd = cmd
	l.stdout = startCopy(lp.outR, t.output.out(), false)
	l.stderr = startCopy(lp.errR, t.output.err(), true)
	l.begin(index, t.out)
	return l, nil
}

// startLocal starts the serial worker: the same serve loop as a worker
// process, in a goroutine of this process, over pipes in memory
// (memPipe).
func (t *pipeTransport) startLocal(index int, win *shm.Window) (link, error) {
	return t.startLocalJoin(index, shmPublisher{win}, false)
}

// startLocalJoin starts a serial worker reading win; with join, its hello
// brings win along, as that of a worker that joined by itself.
func (t *pipeTransport) startLocalJoin(index int, pw publisher, join bool) (link, error) {
	win := pw.(shmPublisher).w
	lp := makeMemPipes()
	l := newPipeLink(lp.jobsW, lp.repR, t.params)
	l.ctl = lp.ctlW
	l.direct = true
	if join {
		l.joinWin = pw
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.stopLocal = cancel
	l.served = make(chan error, 1)
	l.abandoned = make(chan struct{})
	// Its jobs print through JobOutput, in whole lines, as a worker
	// process's do.
	out := &jobOutput{stdout: newLineWriter(t.output.out()), stderr: newLineWriter(t.output.err())}
	ctx = context.WithValue(ctx, jobOutputKey{}, out)
	go func() {
		err := serveLocal(ctx, lp.jobsR, lp.repW, lp.ctlR, shmView{win}, t.cache(index))
		out.stdout.flush()
		out.stderr.flush()
		lp.closeWorkers()
		l.served <- err
	}()
	l.begin(index, t.out)
	return l, nil
}

// serveLocal is serial mode's worker: the pipe handshake, then serve.
func serveLocal(ctx context.Context, in io.Reader, out io.Writer, ctl io.Reader, win windowView, cache *cachepool.Cache) error {
	wc, params, err := acceptPipe(in, out, ctl)
	if err != nil {
		return err
	}
	return serve(ctx, wc, win, cache, params, false, new(atomic.Bool))
}

// memPipes are the pipes of a local worker's link, as linkPipes.
type memPipes struct {
	jobsR, repR, ctlR *memPipeReader
	jobsW, repW, ctlW *memPipeWriter
}

func makeMemPipes() *memPipes {
	var lp memPipes
	lp.jobsR, lp.jobsW = newMemPipe()
	lp.repR, lp.repW = newMemPipe()
	lp.ctlR, lp.ctlW = newMemPipe()
	return &lp
}

// closeWorkers closes the worker's ends.
func (lp *memPipes) closeWorkers() {
	lp.jobsR.Close()
	lp.repW.Close()
	lp.ctlR.Close()
}

// linkPipes are the pipes of a link: jobs and control (parent to worker),
// replies (worker to parent), and, for a worker process, its stdout and
// stderr. The parent keeps the ends it reads or writes; the worker's ends
// are closed in the parent once the worker has them.
type linkPipes struct {
	jobsR, jobsW, repR, repW, ctlR, ctlW, outR, outW, errR, errW *os.File
}

// makePipes makes a link's pipes, with stdout and stderr for a worker
// process.
func makePipes(output bool) (*linkPipes, error) {
	var lp linkPipes
	pairs := []*[2]**os.File{{&lp.jobsR, &lp.jobsW}, {&lp.repR, &lp.repW}, {&lp.ctlR, &lp.ctlW}}
	if output {
		pairs = append(pairs, &[2]**os.File{&lp.outR, &lp.outW}, &[2]**os.File{&lp.errR, &lp.errW})
	}
	for _, pr := range pairs {
		r, w, err := os.Pipe()
		if err != nil {
			lp.closeParents()
			lp.closeWorkers()
			return nil, fmt.Errorf("engine: pipe: %w", err)
		}
		*pr[0], *pr[1] = r, w
	}
	return &lp, nil
}

// closeWorkers closes the worker's ends.
func (lp *linkPipes) closeWorkers() { closeAll(lp.jobsR, lp.repW, lp.ctlR, lp.outW, lp.errW) }

// closeParents closes the parent's ends.
func (lp *linkPipes) closeParents() { closeAll(lp.jobsW, lp.repR, lp.ctlW, lp.outR, lp.errR) }

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

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
