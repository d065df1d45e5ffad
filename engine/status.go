package engine

import (
	"fmt"
	"time"
)

// Status is where a job is in its life.
type Status int32

const (
	// Pending: queued, waiting for its dependencies to succeed.
	Pending Status = iota
	// Queued: its dependencies succeeded; waiting for a worker.
	Queued
	// Running: sent to a worker, which runs it (or, when the job before
	// it on that worker is a short one, is about to).
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

	numStatuses = iota
)

var statusNames = [...]string{"pending", "queued", "running", "succeeded", "failed", "cancelled", "aborted"}

// String returns the status's lower-case name.
func (s Status) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("status(%d)", int32(s))
}

// Done reports whether the status is final: Succeeded, Failed, Cancelled or
// Aborted.
func (s Status) Done() bool { return s >= Succeeded }

// EventKind says what an [Event] reports.
type EventKind int

const (
	// PoolStatus: the pool changed state (see [PoolState]).
	PoolStatus EventKind = iota
	// JobAdded: a job was queued; its status is in New.
	JobAdded
	// JobStatus: a job went from Old to New.
	JobStatus
	// TickEvent: nothing else happened for the period given to [Tick].
	// (The option has the short name.)
	TickEvent
)

var kindNames = [...]string{"pool", "added", "status", "tick"}

func (k EventKind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

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

// An Event reports progress to the listeners given with [OnEvent].
type Event struct {
	Kind EventKind
	Time time.Time

	// Pool is the pool's state (every kind).
	Pool PoolState

	// For JobAdded and JobStatus: the job, its function's name and labels,
	// and its status before and after. Worker is the worker the job ran on
	// (from 1; 0 before it runs, and in serial mode 1). Err is the job's
	// error once it is Failed, Cancelled or Aborted.
	JobID    int
	Func     string
	Labels   map[string]string
	Old, New Status
	Worker   int
	Err      error

	// Counts holds the number of jobs in each status after the event,
	// indexed by Status. CacheBytes is the memory that items resident in the
	// workers' caches held at their last report (where items report sizes).
	Counts     [numStatuses]int
	CacheBytes int64
}

// Total returns the number of jobs in the pool when the event was made.
func (e Event) Total() int {
	n := 0
	for _, c := range e.Counts {
		n += c
	}
	return n
}
