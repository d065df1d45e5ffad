package engine

import "fmt"

// Status is where a job is in its life.
type Status int32

const (
	// Pending: queued, waiting for its dependencies to succeed.
	Pending Status = iota
	// Queued: its dependencies succeeded; waiting for a worker.
	Queued
	// Running: sent to a worker, which runs it, or will next: a job whose
	// function takes less than 100 ms on average may be sent to a worker
	// ahead of the one it runs, to wait there (and, if it needs no cache
	// item, is taken back, Running to Queued, when another worker has
	// nothing to do before it starts).
	Running
	// Succeeded: the function returned a nil error; the result is available.
	Succeeded
	// Failed: the function returned an error or panicked, or its argument
	// or result could not be encoded.
	Failed
	// Cancelled: it never ran: [Job.Cancel], a dependency that did not
	// succeed, fail-fast, or the end of the pool's context.
	Cancelled
	// Aborted: its worker process died (or was stopped) while running it.
	Aborted
	// Skipped: its work was already done (it was queued with [Skip]): it
	// did not run, and counts as succeeded for the jobs that come after
	// it; it has no result.
	Skipped

	numStatuses = iota
)

var statusNames = [...]string{"pending", "queued", "running", "succeeded", "failed", "cancelled", "aborted", "skipped"}

// String returns the status's lower-case name.
func (s Status) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("status(%d)", int32(s))
}

// Done reports whether the status is final: Succeeded, Failed, Cancelled,
// Aborted or Skipped.
func (s Status) Done() bool { return s >= Succeeded }

// PoolState is the state of a pool as a whole.
type PoolState int

const (
	// PoolIdle: created, Run not called yet.
	PoolIdle PoolState = iota
	// PoolStarting: Run is starting the workers.
	PoolStarting
	// PoolRunning: jobs are being dispatched.
	PoolRunning
	// PoolStopping: no more jobs will start; the workers are being stopped.
	PoolStopping
	// PoolClosed: Run has returned.
	PoolClosed
)

var poolStateNames = [...]string{"idle", "starting", "running", "stopping", "closed"}

func (s PoolState) String() string {
	if s >= 0 && int(s) < len(poolStateNames) {
		return poolStateNames[s]
	}
	return fmt.Sprintf("state(%d)", int(s))
}
