package engine

import "time"

// dispatch sends Queued jobs to workers that can take them.
func (s *scheduler) dispatch() {
	p := s.p
	if p.failed {
		return
	}
	s.round++
	for _, pl := range s.waiting {
		s.placeChanged(pl) // it waited last round: a taker again
	}
	clear(s.waiting)
	s.waiting = s.waiting[:0]
	for j := p.queue.peek(); j != nil; j = p.queue.peek() {
		if j.Status() != Queued {
			p.queue.pop()
			continue
		}
		pl, aheadOnly := s.pick()
		if pl == nil {
			break
		}
		g := p.queue.heads[0]
		if p.cfg.affinity {
			if g = s.choose(pl); g == nil {
				s.wait(pl) // it waits this round out
				continue
			}
		}
		j = g.jobs[0]
		if p.cfg.limited() && (!s.fits(j) || !s.fits(p.queue.peek())) {
			break // it waits for room, and no younger job passes the oldest
		}
		if aheadOnly && buildsAt(j, pl) {
			s.wait(pl) // it would build ahead: not this round
			continue
		}
		p.queue.popFrom(g)
		if j.argErr != nil {
			p.finish(j, Failed, j.argErr)
			continue
		}
		j.worker = pl.index
		j.tries++
		j.began = time.Time{}
		if len(pl.inflight) == 0 {
			// It starts now; and from now on the worker owes news.
			now := time.Now()
			j.runSince = now
			pl.heard = later(pl.heard, now)
		}
		pl.pushInflight(j)
		if j.revoking {
			s.revoking++ // from a worker that died before it handed it back
		}
		pl.countFunc(j.fn, 1)
		if len(pl.inflight) > 1 && revocable(j) {
			pl.revocable++
		}
		s.placeChanged(pl)
		pl.sent++
		j.seq = pl.sent
		s.addHeld(pl, j.keys)
		p.setStatus(j, Running)
		t := task{id: uint64(j.id), fn: j.fn.name, arg: j.arg, keys: j.keys, timeout: j.timeout, attempt: j.tries}
		if p.cfg.budget > 0 && len(pl.resident) > 0 {
			if pl.orderRound != s.round {
				pl.order, pl.orderRound = s.evictionOrder(pl), s.round
			}
			t.order = pl.order // the same for every task of the round
		}
		if len(pl.tasks) == 0 {
			s.sending = append(s.sending, pl)
		}
		pl.tasks = append(pl.tasks, t)
	}
	s.rebalance()
	// The jobs go once the windows list their keys as in flight on their
	// workers (collect, deliver).
}

// rebalance revokes jobs that wait behind others at busy workers, one for
// each worker that has nothing to do and no revoke on its way already.
// It takes the last job waiting at the busiest worker first, among those
// that need no cache item.
//
// A job that needs items stays: moving it would change what the workers
// hold. The busy worker's window would stop listing its items, and the
// worker might evict what its next jobs need. Such jobs are sent ahead
// only where their items are resident, and wait there.
//
// The worker hands a job back unless it has started it. The job is queued
// again when it comes back (revoked) and goes, most likely, to the idle
// worker.
func (s *scheduler) rebalance() {
	if s.donors.Len() == 0 {
		return // no job to take back
	}
	// The idle workers: the free ones, but those that wait this round.
	idle := s.free
	for _, pl := range s.waiting {
		if pl.in.free {
			idle--
		}
	}
	for range idle - min(s.revoking, idle) {
		from, last := s.busiest()
		if last == nil {
			return
		}
		last.revoking = true
		s.revoking++
		from.revocable--
		s.placeChanged(from)
		from.l.revoke(uint64(last.id), last.seq)
	}
}

// busiest returns the place with the most jobs waiting behind the
// one its worker runs that need no item (and none of them revoked
// already), the lowest index among equals, and the last of those; or
// nil, nil.
func (s *scheduler) busiest() (*place, *job) {
	from := s.donors.top()
	if from == nil {
		return nil, nil
	}
	for i := len(from.inflight) - 1; i > 0; i-- {
		if j := from.inflight[i]; revocable(j) {
			return from, j
		}
	}
	return nil, nil // not reached while from.revocable counts right
}

// revocable reports whether rebalance may take back j, which waits behind
// the job its worker runs: it needs no item and has no revoke or cancel on
// its way. (The jobs in flight are Running while the loop runs.)
func revocable(j *job) bool { return len(j.keys) == 0 && !j.revoking && !j.cancelled }

// pick returns the place whose worker should take the next job, or
// nil: the one with the fewest jobs in flight among those that may take one
// more (the lowest index among equals); and whether it may take it only
// ahead of the one it runs, if the job builds nothing there (canTakeHow).
// It looks at the takers in that order and sets aside (blocks) those that
// may not take one more, until they change.
func (s *scheduler) pick() (best *place, aheadOnly bool) {
	for pl := s.takers.top(); pl != nil; pl = s.takers.top() {
		if ok, ahead := s.canTakeHow(pl); ok {
			return pl, ahead
		}
		s.block(pl)
	}
	return nil, false
}

// wait makes pl wait this dispatch round out.
func (s *scheduler) wait(pl *place) {
	pl.waitRound = s.round
	s.waiting = append(s.waiting, pl)
	s.placeChanged(pl)
}

// canTakeHow reports whether pl's worker may be sent one more job,
// and whether only one ahead of the job it runs that builds nothing (see
// the dispatch rules above).
func (s *scheduler) canTakeHow(pl *place) (ok, aheadOnly bool) {
	if pl.l == nil || !pl.ready || pl.stopping {
		return false, false
	}
	if len(pl.inflight) == 0 {
		return true, false
	}
	if len(pl.inflight) >= maxInFlight || s.p.cfg.limited() || s.p.cfg.failFast {
		return false, false
	}
	if fast, queued := s.load(pl); fast && queued < inFlightBudget {
		return true, false
	}
	if len(pl.inflight) == 1 {
		j := pl.inflight[0]
		if t, ok := s.fnTime[j.fn]; ok && t < aheadJob && time.Since(j.runSince) < aheadJob {
			return true, true
		}
	}
	return false, false
}

// load reports whether every job in flight at pl is of a function whose
// jobs take less than fastJob on average, and their summed average times.
func (s *scheduler) load(pl *place) (fast bool, queued time.Duration) {
	fast = true
	for _, c := range pl.funcs {
		t, ok := s.fnTime[c.fn]
		if !ok || t >= fastJob {
			fast = false
		}
		queued += time.Duration(c.n) * t
	}
	return fast, queued
}

// buildsAt reports whether j needs an item that pl's worker did not hold
// at its last report.
func buildsAt(j *job, pl *place) bool {
	for _, k := range j.keys {
		if _, ok := pl.resident[k]; !ok {
			return true
		}
	}
	return false
}
