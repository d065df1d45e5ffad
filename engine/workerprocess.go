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

	"github.com/poolrun/poolrun/internal/enginehost"
	"github.com/poolrun/poolrun/shm"
)

// A workerProcess is a worker process of this program, started for a pool
// that runs elsewhere (enginehost.WorkerProcess, whose methods say what
// they do). Its window is in shared memory, as a local pool's workers'.
type workerProcess struct {
	sp     *spawned
	win    *shm.Window
	leaseW *os.File // the write end of the worker's lease pipe

	mu    sync.Mutex
	ended bool
}

// startWorkerProcess is enginehost.Engine.StartWorkerProcess.
func startWorkerProcess(capacity int, stdout, stderr io.Writer) (enginehost.WorkerProcess, error) {
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
	return &workerProcess{sp: sp, win: win, leaseW: leaseW}, nil
}

// Lease writes the lease's end, in the host's monotonic clock, to the
// lease pipe without waiting (enginehost.WorkerProcess.Lease).
func (w *workerProcess) Lease(until time.Time) {
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
func (w *workerProcess) Jobs() io.WriteCloser { return w.sp.jobsW }

// Control is the stream of cancels and revokes to the worker.
func (w *workerProcess) Control() io.WriteCloser { return w.sp.ctlW }

// Replies is the stream of frames from the worker.
func (w *workerProcess) Replies() io.ReadCloser { return w.sp.repR }

// PID is the worker's process id.
func (w *workerProcess) PID() int { return w.sp.cmd.Process.Pid }

// Publish puts the set of required keys in the worker's window at
// generation gen, the pool's generation of that set (even, and above the
// last one published), and reports whether the set overflowed the window
// (the worker then keeps every item).
func (w *workerProcess) Publish(keys []uint64, gen uint64) (over bool, err error) {
	_, err = w.win.PublishAt(keys, gen)
	if errors.Is(err, shm.ErrOverflow) {
		return true, nil
	}
	return false, err
}

// Terminate sends SIGTERM, then SIGKILL after grace
// (enginehost.WorkerProcess.Terminate).
func (w *workerProcess) Terminate(grace time.Duration) { w.sp.terminate(grace) }

// Wait waits for the worker's end (once its replies have been read to
// their end, or it was terminated), releases its window, and returns why
// it ended: nil for a worker that exited with status 0 after the pool's
// stop.
func (w *workerProcess) Wait() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return errors.New("engine: a worker process's Wait called twice")
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
