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
	"github.com/poolrun/poolrun/shm"
)

// conn is the scheduler's side of one worker: it sends frames stamped with
// the window generation and reports replies and the worker's end as
// messages. It is the seam a transport other than pipes would implement.
type conn interface {
	// send queues frames for the worker; it never blocks.
	send(frames []byte)
	// terminate asks the worker to stop now (SIGTERM: its running job's
	// context is cancelled) and kills it if it has not exited after grace.
	terminate(grace time.Duration)
	// pid is the worker's process id (this process's, in serial mode).
	pid() int
}

// msg is what a conn reports to the scheduler.
type msg struct {
	slot    *workerSlot
	c       conn
	hello   bool
	replies []*reply
	bye     *cachepool.Stats
	died    error // the worker is gone; nil died and nil others never happen
}

// pipeConn carries frames over a pair of pipes, with one goroutine writing
// (so that the scheduler never blocks on a full pipe) and one reading.
type pipeConn struct {
	w   io.WriteCloser
	r   io.ReadCloser
	cmd *exec.Cmd // nil in serial mode
	p   int
	// policy is the pool's eviction policy, sent in the handshake; the
	// worker's answer must name the same.
	policy EvictPolicy

	mu      sync.Mutex
	cond    *sync.Cond
	pending []byte
	closed  bool

	// serial mode: the serving goroutine's cancel and end.
	cancel context.CancelFunc
	served chan error
}

func newPipeConn(w io.WriteCloser, r io.ReadCloser, policy EvictPolicy) *pipeConn {
	c := &pipeConn{w: w, r: r, policy: policy}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *pipeConn) pid() int { return c.p }

func (c *pipeConn) send(frames []byte) {
	c.mu.Lock()
	c.pending = append(c.pending, frames...)
	c.mu.Unlock()
	c.cond.Signal()
}

// writeLoop writes what send queued until the conn is closed or a write
// fails (the worker is gone: the reader will find out and report it).
func (c *pipeConn) writeLoop() {
	var buf []byte
	for {
		c.mu.Lock()
		for len(c.pending) == 0 && !c.closed {
			c.cond.Wait()
		}
		if c.closed {
			c.mu.Unlock()
			c.w.Close()
			return
		}
		buf, c.pending = c.pending, buf[:0]
		c.mu.Unlock()
		if _, err := c.w.Write(buf); err != nil {
			c.close()
		}
	}
}

func (c *pipeConn) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cond.Signal()
}

// readLoop reads the worker's frames and reports them, batching the replies
// that arrived together, until the stream ends; then it reports the end.
func (c *pipeConn) readLoop(slot *workerSlot, out chan<- msg) {
	fr := newFrameReader(c.r)
	err := func() error {
		pid, policy, err := fr.hello()
		if err != nil {
			return err
		}
		if policy != c.policy {
			return fmt.Errorf("protocol: the worker applies eviction policy %v, the pool asked for %v", policy, c.policy)
		}
		c.p = int(pid)
		out <- msg{slot: slot, c: c, hello: true}
		for {
			var batch []*reply
			for {
				kind, d, err := fr.next()
				if err != nil {
					if len(batch) > 0 {
						out <- msg{slot: slot, c: c, replies: batch}
					}
					return err
				}
				switch kind {
				case frameDone:
					r, err := d.done()
					if err != nil {
						return err
					}
					batch = append(batch, r)
				case frameBye:
					s := d.stats()
					if len(batch) > 0 {
						out <- msg{slot: slot, c: c, replies: batch}
						batch = nil
					}
					out <- msg{slot: slot, c: c, bye: &s}
				default:
					return fmt.Errorf("protocol: unexpected frame of kind %d", kind)
				}
				if !fr.buffered() {
					break
				}
			}
			if len(batch) > 0 {
				out <- msg{slot: slot, c: c, replies: batch}
			}
		}
	}()
	c.close()
	c.r.Close()
	out <- msg{slot: slot, c: c, died: c.wait(err)}
}

// wait waits for the worker's end and describes it.
func (c *pipeConn) wait(readErr error) error {
	if c.cmd == nil {
		err := <-c.served
		if err == nil {
			err = errors.New("worker goroutine ended")
		}
		return err
	}
	err := c.cmd.Wait()
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

func (c *pipeConn) terminate(grace time.Duration) {
	if c.cmd == nil {
		c.cancel()
		c.close()
		return
	}
	p := c.cmd.Process
	p.Signal(syscall.SIGTERM)
	time.AfterFunc(grace, func() { p.Kill() })
}

// startProcess starts worker slot.index as a re-execution of this binary,
// on the spawner thread (see spawner), and its conn's goroutines.
func startProcess(sp *spawner, slot *workerSlot, win *shm.Window, policy EvictPolicy, out chan<- msg) (*pipeConn, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("engine: finding this program to start workers: %w", err)
	}
	// The parent's ends are non-blocking (its goroutines wait in the network
	// poller, holding no thread); exec hands the worker its ends in blocking
	// mode, which suits a process that does one thing at a time.
	jobsR, jobsW, repR, repW, err := pipes()
	if err != nil {
		return nil, err
	}
	setPipeSize(jobsW)
	setPipeSize(repW)

	cmd := exec.Command(exe)
	cmd.Args = append([]string{os.Args[0]}, os.Args[1:]...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", WorkerEnv, protoVersion))
	cmd.Stdin = nil
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = []*os.File{win.File(), jobsR, repW} // fds 3, 4, 5
	cmd.SysProcAttr = workerSysProcAttr()
	err = sp.start(cmd)
	jobsR.Close()
	repW.Close()
	if err != nil {
		jobsW.Close()
		repR.Close()
		return nil, fmt.Errorf("engine: starting worker %d: %w", slot.index, err)
	}
	c := newPipeConn(jobsW, repR, policy)
	c.cmd = cmd
	c.p = cmd.Process.Pid
	var e enc
	e.hello(slot.index, policy)
	c.send(e.b)
	go c.writeLoop()
	go c.readLoop(slot, out)
	return c, nil
}

// startLocal starts the serial worker: the same serve loop as a worker
// process, in a goroutine of this process, over in-process pipes.
func startLocal(slot *workerSlot, win *shm.Window, cache *cachepool.Cache, policy EvictPolicy, out chan<- msg) (*pipeConn, error) {
	jobsR, jobsW, repR, repW, err := pipes()
	if err != nil {
		return nil, err
	}
	c := newPipeConn(jobsW, repR, policy)
	c.p = os.Getpid()
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.served = make(chan error, 1)
	go func() {
		err := serve(ctx, jobsR, repW, win, cache, new(atomic.Bool))
		jobsR.Close()
		repW.Close()
		c.served <- err
	}()
	var e enc
	e.hello(slot.index, policy)
	c.send(e.b)
	go c.writeLoop()
	go c.readLoop(slot, out)
	return c, nil
}

// pipes makes the two pipes of a conn: jobs (parent to worker) and replies.
func pipes() (jobsR, jobsW, repR, repW *os.File, err error) {
	if jobsR, jobsW, err = os.Pipe(); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("engine: pipe: %w", err)
	}
	if repR, repW, err = os.Pipe(); err != nil {
		jobsR.Close()
		jobsW.Close()
		return nil, nil, nil, nil, fmt.Errorf("engine: pipe: %w", err)
	}
	return jobsR, jobsW, repR, repW, nil
}
