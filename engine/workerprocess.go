package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/poolrun/poolrun/shm"
)

// A WorkerProcess is a worker process of this program, started for a pool
// that runs elsewhere: whoever starts it (package cluster's host agent)
// relays the pool's frames (PROTOCOL.md) to it and its frames back, and
// publishes the pool's set for it in its window, a window in shared memory
// that the worker reads with atomic loads, as those of a local pool's own
// workers. It is the very process a pool starts for [Workers], with its
// protocol, its cache and its process group.
type WorkerProcess struct {
	sp     *spawned
	win    *shm.Window
	leaseW *os.File // the write end of the worker's lease pipe

	mu    sync.Mutex
	ended bool
}

// StartWorkerProcess starts a worker process of this program whose window
// has capacity slots (the pool's [Pool.WindowCapacity]); what it prints
// goes, in whole lines, to stdout and stderr (os.Stdout and os.Stderr if
// nil). The program must call [Init] first in main, as for [Workers].
func StartWorkerProcess(capacity int, stdout, stderr io.Writer) (*WorkerProcess, error) {
	win, err := shm.Create(capacity)
	if err != nil {
		return nil, fmt.Errorf("engine: creating a window: %w", err)
	}
	leaseR, leaseW, err := os.Pipe()
	if err != nil {
		win.Close()
		return nil, fmt.Errorf("engine: starting a worker process: %w", err)
	}
	sp, err := spawnWorker(win, workerOutput{stdout: stdout, stderr: stderr}, []string{leaveEnv + "=1"}, leaseR)
	leaseR.Close()
	if err != nil {
		win.Close()
		leaseW.Close()
		return nil, fmt.Errorf("engine: starting a worker process: %w", err)
	}
	return &WorkerProcess{sp: sp, win: win, leaseW: leaseW}, nil
}

// Lease lets the commands of the worker's jobs run until until. Once a
// worker process has had a lease, it stops (SIGSTOP) the processes whose
// spawn.OwnerEnv mark names it as their worker (package execflow's
// commands, and what they start) when its latest lease ends, and
// continues them (SIGCONT) when a later one comes; its own process goes
// on. A starter that renews the lease only while the worker's jobs are
// its to run (a host agent, while its pool counts the host as its own)
// so has them stop when it cannot act itself: stopped, hung, cut off.
// When the starter dies, the worker kills them. Lease never waits: a
// lease that does not fit in the pipe (of a worker that does not read,
// stopped) is dropped. Leases are Linux's; elsewhere they do nothing.
func (w *WorkerProcess) Lease(until time.Time) {
	left := time.Until(until) // first: the end is never early in monoNow's clock
	end := monoNow() + int64(left)
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(end))
	if rc, err := w.leaseW.SyscallConn(); err == nil {
		rc.Write(func(fd uintptr) bool {
			syscall.Write(int(fd), b)
			return true // done, written or not
		})
	}
}

// Jobs is the stream of frames to the worker (its handshake, jobs, stop).
func (w *WorkerProcess) Jobs() io.WriteCloser { return w.sp.jobsW }

// Control is the stream of cancels and revokes to the worker.
func (w *WorkerProcess) Control() io.WriteCloser { return w.sp.ctlW }

// Replies is the stream of frames from the worker.
func (w *WorkerProcess) Replies() io.ReadCloser { return w.sp.repR }

// PID is the worker's process id.
func (w *WorkerProcess) PID() int { return w.sp.cmd.Process.Pid }

// Publish puts the set of required keys in the worker's window at
// generation gen, the pool's generation of that set (even, and above the
// last one published), and reports whether the set overflowed the window
// (the worker then keeps every item).
func (w *WorkerProcess) Publish(keys []uint64, gen uint64) (over bool, err error) {
	_, err = w.win.PublishAt(keys, gen)
	if errors.Is(err, shm.ErrOverflow) {
		return true, nil
	}
	return false, err
}

// Terminate asks the worker to leave its pool (SIGTERM): it starts no other
// job, its running job's context is cancelled (a job that then returns an
// error is Aborted, as under a worker that died), its cache's cleanups run,
// and it says goodbye, so that its pool gives the jobs it had been sent to
// other workers at once, as a worker of [Serve] whose context ends; it is
// killed if it has not gone after grace (at once without).
func (w *WorkerProcess) Terminate(grace time.Duration) { w.sp.terminate(grace) }

// Wait waits for the worker's end (once its replies have been read to
// their end, or it was terminated), releases its window, and returns why
// it ended: nil for a worker that exited with status 0 after the pool's
// stop.
func (w *WorkerProcess) Wait() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return errors.New("engine: WorkerProcess.Wait called twice")
	}
	w.ended = true
	err := w.sp.wait(nil)
	w.win.Close()
	w.sp.jobsW.Close()
	w.sp.ctlW.Close()
	w.leaseW.Close()
	if w.sp.cmd.ProcessState.Success() {
		return nil
	}
	return fmt.Errorf("engine: worker process %d %w", w.PID(), err)
}
