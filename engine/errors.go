package engine

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrDependencyFailed is wrapped by the error of a job that was
	// cancelled because a dependency did not succeed; the message names it.
	ErrDependencyFailed = errors.New("dependency did not succeed")

	// ErrNotCancellable is wrapped by the error [Job.Cancel] returns for a
	// job that is running or finished.
	ErrNotCancellable = errors.New("job is not cancellable")

	// ErrPoolClosed is the error of a job queued after the pool's Run
	// returned; such a job is Cancelled at once.
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

// A PanicError is the error of a job whose function panicked: the panic's
// value, printed, and the stack of the goroutine that panicked.
type PanicError struct {
	Value string
	Stack []byte
}

func (e *PanicError) Error() string { return "panic: " + e.Value }

// A RemoteError is an error returned by a job function. Only its message
// crosses the process boundary, and serial mode takes the same path, so
// errors.Is against the function's own sentinel errors does not work in
// either mode: compare messages, or return data in the result instead.
type RemoteError struct{ Msg string }

func (e *RemoteError) Error() string { return e.Msg }
