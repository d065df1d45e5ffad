package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/poolrun/poolrun/cachepool"
)

var (
	// ErrDependencyFailed is wrapped by the error of a job that was
	// cancelled because a dependency did not succeed; the message names it.
	ErrDependencyFailed = errors.New("dependency did not succeed")

	// ErrNotCancellable is wrapped by the error [Job.Cancel] returns for a
	// job that is running or finished.
	ErrNotCancellable = errors.New("job is not cancellable")

	// ErrPoolClosed is the error of a job queued once the pool's Run has
	// begun to stop, or has returned; such a job is Cancelled at once.
	ErrPoolClosed = errors.New("pool is closed")

	// ErrWorkerDied is wrapped by the error of a job whose worker process
	// died while running it (status Aborted); the message gives the exit
	// status or signal.
	ErrWorkerDied = errors.New("worker process died")

	// ErrNotRun is the error [Job.Result] returns for a job that has not
	// finished yet.
	ErrNotRun = errors.New("job has not finished")

	// ErrFailFast is wrapped by the error of jobs cancelled because another
	// job failed in a pool made with [FailFast].
	ErrFailFast = errors.New("cancelled by fail-fast")

	// ErrPanic is matched, through errors.Is, by the error of a job whose
	// function panicked and of a scheduler (see [Pool.Go]) that panicked:
	// a [*PanicError]. It is [cachepool.ErrPanic], which a panic in an
	// item's build also matches, so one test covers every recovered panic.
	ErrPanic = cachepool.ErrPanic

	// ErrCrashLoop is wrapped by the error Run returns when five workers
	// in a row died without having run a job, and the pool stopped
	// starting workers. Such a death is before the handshake, or after it
	// while the worker had no job. The message gives how the last one
	// ended and what it last printed on its standard error. When none of
	// them had answered the handshake, it asks whether main calls [Init]
	// first. (A main that reaches [New] without Init is [ErrNoInit] at
	// the first worker instead.)
	// The pool goes on with the workers that serve, and ends when none is
	// left. A worker that dies under a job does not count (see [Retries]).
	ErrCrashLoop = errors.New("crash loop")

	// ErrNoInit is wrapped by the error Run returns when a worker process
	// ran the program's main again instead of serving jobs, because main
	// does not call [Init] first: the worker exits when it reaches [New]
	// (with status 78, printing nothing), and the pool, seeing a worker
	// end so before its handshake, starts no other and stops at once. The
	// message names engine.Init and where it must be called.
	ErrNoInit = errors.New("main does not call engine.Init first")

	// ErrTooLarge is wrapped by the error of a job whose argument or result
	// encodes to more bytes than the pool's limit ([MaxValueSize]); the
	// message gives both sizes. Such a job fails; the pool goes on.
	ErrTooLarge = errors.New("value too large")
)

// Errors of the package's own machinery, never returned as they are.
var (
	// errStopped is wrapped by the error of jobs whose worker was stopped
	// because Run's context ended.
	errStopped = errors.New("stopped")

	// errLeft is why a worker that joined the pool by itself is gone when
	// it said goodbye unasked: it was asked to stop (see Serve).
	errLeft = errors.New("left the pool: it was asked to stop (SIGTERM, say)")

	// errShortFrame reports a frame cut short: the stream ended inside it,
	// or a field runs past its end.
	errShortFrame = errors.New("engine: protocol: truncated frame")
)

// A JobError is a job's failure as [Pool.Run] reports it: Run returns
// [errors.Join] of one JobError per job that failed or was aborted, and one
// per scheduler (see [Pool.Go]) that returned an error (JobID 0, Func
// "scheduler").
type JobError struct {
	JobID  int
	Func   string
	Labels map[string]string
	Err    error
}

func (e *JobError) Error() string {
	var b strings.Builder
	if e.JobID == 0 {
		b.WriteString(e.Func)
	} else {
		fmt.Fprintf(&b, "job %d (%s", e.JobID, e.Func)
		for _, k := range sortedKeys(e.Labels) {
			fmt.Fprintf(&b, " %s=%s", k, e.Labels[k])
		}
		b.WriteString(")")
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *JobError) Unwrap() error { return e.Err }

// A PanicError is a recovered panic, with the stack of the goroutine that
// panicked; it matches [ErrPanic]. It is the one type of the module for a
// recovered panic: [cachepool.PanicError]. Op says where it happened: "job"
// for a job's function (Value is then the panic value as printed by the
// worker: only text crosses the process boundary, in serial mode too),
// "scheduler" for a function given to [Pool.Go], and "build", "cleanup" or
// "size" for an item's functions.
type PanicError = cachepool.PanicError

// A TimeoutError is the error of a job that ran past its time (see
// [Timeout]); it wraps [context.DeadlineExceeded]. Returned says what the
// job returned once its context ended, if it returned (else ""); Killed,
// that it did not return within the grace period, so that its worker was
// killed.
type TimeoutError struct {
	Timeout  time.Duration
	Returned string
	Killed   bool
	Grace    time.Duration
}

func (e *TimeoutError) Error() string {
	msg := fmt.Sprintf("timed out after %v", e.Timeout)
	switch {
	case e.Killed:
		msg += fmt.Sprintf(" and did not return within %v more: its worker was killed", e.Grace)
	case e.Returned != "" && e.Returned != context.DeadlineExceeded.Error():
		msg += " (it returned: " + e.Returned + ")"
	}
	return msg
}

func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }

// A RemoteError is an error returned by a job function. Only its message
// crosses the process boundary, and serial mode takes the same path, so
// errors.Is against the function's own sentinel errors does not work in
// either mode: compare messages, or return data in the result instead.
type RemoteError struct{ Msg string }

func (e *RemoteError) Error() string { return e.Msg }

// ErrNoWorkers is the error of a RemoteOnly pool that went without any
// worker for longer than its wait.
var ErrNoWorkers = errors.New("no worker")
