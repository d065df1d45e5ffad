package engine

import (
	"context"
	"sync"
	"sync/atomic"
)

// jobControl is a worker's record of the parent's cancels and revokes,
// which come while a job may run (on the control pipe, or from a local
// link's methods). A cancel reaches the job it is for while it runs, or
// marks it if it has not started. The worker counts the tasks it takes;
// a revoke names a task by its place in that count: one not taken yet is
// handed back at once and skipped when it is taken, one taken already
// runs on, and its reply says how it ended.
//
// marks counts the cancels and revokes on their way or recorded: while it
// is 0, taking a task and starting it cost no lock. A cancel or revoke
// adds to marks before it looks at what was taken or runs, and the worker
// counts a task taken before it looks at marks, so that neither misses
// the other.
type jobControl struct {
	taken atomic.Uint64 // the tasks taken
	marks atomic.Int64

	mu        sync.Mutex
	runID     uint64                  // the task that runs, or 0
	runCancel context.CancelCauseFunc // cancels its context
	early     map[uint64]bool         // cancels of tasks not started
	revoked   map[uint64]bool         // tasks to skip, by place
}

// cancel cancels task id's context if it runs, or marks it cancelled.
func (c *jobControl) cancel(id uint64) {
	c.marks.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runID == id && c.runCancel != nil {
		c.runCancel(errParentCancelled)
		c.marks.Add(-1)
		return
	}
	if c.early == nil {
		c.early = map[uint64]bool{}
	}
	if c.early[id] {
		c.marks.Add(-1) // marked already
	}
	c.early[id] = true
}

// revoke records a revoke of the seq-th task and reports whether it is
// handed back: it has not been taken.
func (c *jobControl) revoke(seq uint64) bool {
	c.marks.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if seq <= c.taken.Load() || c.revoked[seq] {
		c.marks.Add(-1)
		return false
	}
	if c.revoked == nil {
		c.revoked = map[uint64]bool{}
	}
	c.revoked[seq] = true
	return true
}

// take counts a task taken and reports whether it was handed back.
func (c *jobControl) take() (skip bool) {
	n := c.taken.Add(1)
	if c.marks.Load() == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.revoked[n] {
		delete(c.revoked, n)
		c.marks.Add(-1)
		return true
	}
	return false
}

// cancelledEarly reports, and forgets, a cancel of task id that came
// before the task started.
func (c *jobControl) cancelledEarly(id uint64) bool {
	if c.marks.Load() == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.early[id] {
		delete(c.early, id)
		c.marks.Add(-1)
		return true
	}
	return false
}

// running records the task that runs (0: none) and its cancel.
func (c *jobControl) running(id uint64, cancel context.CancelCauseFunc) {
	c.mu.Lock()
	c.runID, c.runCancel = id, cancel
	c.mu.Unlock()
	if id != 0 && c.cancelledEarly(id) {
		cancel(errParentCancelled) // came between the task's taking and now
	}
}

// cancelRunning cancels the running job's context, if a job runs, with
// cause.
func (c *jobControl) cancelRunning(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runCancel != nil {
		c.runCancel(cause)
	}
}
