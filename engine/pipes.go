package engine

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"

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
