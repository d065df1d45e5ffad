package engine

import (
	"fmt"
	"time"
)

// The job graph: jobs, their dependencies and statuses, and two reference
// counts per item key: over the jobs that have not finished (refs), and
// over those not sent to a worker yet, Pending or Queued (unsent).
// Everything here runs under p.mu; a job's end costs time in proportion to
// its own items and dependents, never to the size of the pool.

// refCounts counts, per key, the jobs that need it; changed says whether
// the set of keys with a count changed since it was last cleared.
type refCounts struct {
	n       map[uint64]int32
	changed bool
}

func (r *refCounts) add(keys []uint64) {
	if r.n == nil {
		r.n = map[uint64]int32{}
	}
	for _, k := range keys {
		if r.n[k]++; r.n[k] == 1 {
			r.changed = true
		}
	}
}

func (r *refCounts) drop(keys []uint64) {
	for _, k := range keys {
		if r.n[k]--; r.n[k] <= 0 {
			delete(r.n, k)
			r.changed = true
		}
	}
}

// has reports whether some job needs k.
func (r *refCounts) has(k uint64) bool { return r.n[k] > 0 }

// need counts the keys of a job (sorted, without repeats) in p.refs, and
// release drops them. A key that gets its first count, or loses its last,
// changes which of the items the workers hold are stale
// (scheduler.needed). p.mu is held.
func (p *Pool) need(keys []uint64) {
	if p.sched != nil {
		for _, k := range keys {
			if !p.refs.has(k) {
				p.sched.needed(k, true)
			}
		}
	}
	p.refs.add(keys)
}

func (p *Pool) release(keys []uint64) {
	p.refs.drop(keys)
	if p.sched != nil {
		for _, k := range keys {
			if !p.refs.has(k) {
				p.sched.needed(k, false)
			}
		}
	}
}

// unsentStatus reports whether a job in status s counts as not sent yet.
func unsentStatus(s Status) bool { return s == Pending || s == Queued }

// add enters a new job; called by Queue.
func (p *Pool) add(j *job) {
	p.mu.Lock()
	defer p.kick()
	defer p.mu.Unlock()
	if p.state == PoolClosed {
		j.err = fmt.Errorf("job queued after the pool ended: %w", ErrPoolClosed)
		j.status.Store(int32(Cancelled))
		if j.done != nil {
			close(j.done)
		}
		return
	}
	j.id = len(p.jobs) + 1
	j.added = time.Now()
	if l := p.learned[j.fn]; len(l) > 0 {
		j.keys = withKeys(j.keys, l...)
		j.sig = sigOf(j.keys)
	}
	p.jobs = append(p.jobs, j)
	p.need(j.keys)
	p.unsent.add(j.keys)
	p.open++
	p.counts[Pending]++
	p.emit(Event{Kind: JobAdded, JobID: j.id, Func: j.fn.name, Labels: j.labels, New: Pending})
	var bad *job
	for _, d := range j.deps {
		switch d.Status() {
		case Succeeded, Skipped:
		case Failed, Cancelled, Aborted:
			bad = d
		default:
			j.waiting++
			d.dependents = append(d.dependents, j)
		}
	}
	switch {
	case p.state == PoolStopping:
		// The scheduler has ended: nothing would send it to a worker.
		p.finish(j, Cancelled, fmt.Errorf("job queued while the pool stopped: %w", ErrPoolClosed))
	case bad != nil:
		p.finish(j, Cancelled, depError(bad))
	case p.failed:
		p.finish(j, Cancelled, fmt.Errorf("queued after a failure: %w", ErrFailFast))
	case j.waiting == 0:
		p.ready(j)
	}
}

// ready queues j, whose dependencies have succeeded, or ends it Skipped.
// p.mu is held.
func (p *Pool) ready(j *job) {
	if j.skip {
		p.finish(j, Skipped, nil)
		return
	}
	p.setStatus(j, Queued)
	p.queue.push(j)
}

func depError(d *job) error {
	return fmt.Errorf("%w: job %d (%s) %s", ErrDependencyFailed, d.id, d.fn.name, d.Status())
}

// setStatus moves j to status s and reports it. p.mu is held.
func (p *Pool) setStatus(j *job, s Status) {
	old := j.Status()
	if len(j.keys) > 0 && unsentStatus(old) != unsentStatus(s) {
		if unsentStatus(s) {
			p.unsent.add(j.keys) // back to the queue: its worker died
		} else {
			p.unsent.drop(j.keys)
		}
	}
	p.counts[old]--
	p.counts[s]++
	j.status.Store(int32(s))
	if p.cfg.listener == nil {
		return // no Event to build
	}
	// j.err is set once the job is done, and for a moment when it goes
	// back to the queue to be retried.
	p.emit(Event{Kind: JobStatus, JobID: j.id, Func: j.fn.name, Labels: j.labels, Old: old, New: s, Worker: j.worker, Err: j.err, Attempt: j.tries})
}

// finish ends j with status s and error err, releases its items, and
// releases or cancels its dependents (and theirs). p.mu is held.
func (p *Pool) finish(j *job, s Status, err error) {
	type end struct {
		j   *job
		s   Status
		err error
	}
	todo := []end{{j, s, err}}
	for len(todo) > 0 {
		e := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		j := e.j
		if j.Status().Done() {
			continue
		}
		j.err = e.err
		if j.ended.IsZero() {
			j.ended = time.Now()
		}
		p.setStatus(j, e.s)
		p.open--
		j.arg = nil // sent, or never to be: the pool needs it no more
		p.release(j.keys)
		for _, d := range j.dependents {
			if d.Status() != Pending {
				continue
			}
			if e.s == Succeeded || e.s == Skipped {
				if d.waiting--; d.waiting == 0 {
					if d.skip {
						todo = append(todo, end{d, Skipped, nil})
					} else {
						p.setStatus(d, Queued)
						p.queue.push(d)
					}
				}
				continue
			}
			todo = append(todo, end{d, Cancelled, depError(j)})
		}
		j.dependents = nil
		if j.done != nil {
			close(j.done)
		}
		if e.s == Failed || e.s == Aborted {
			p.errs = append(p.errs, &JobError{JobID: j.id, Func: j.fn.name, Labels: j.labels, Err: e.err})
			p.failure()
		}
	}
}

// failure notes a failure; with fail-fast it cancels every job that has not
// started. p.mu is held.
func (p *Pool) failure() {
	if !p.cfg.failFast || p.failed {
		return
	}
	p.failed = true
	for _, j := range p.jobs {
		if st := j.Status(); st == Pending || st == Queued {
			p.finish(j, Cancelled, fmt.Errorf("another job failed: %w", ErrFailFast))
		}
	}
}
