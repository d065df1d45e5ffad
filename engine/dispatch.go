package engine

import "time"

// dispatch sends Queued jobs to workers that can take them.
func (s *scheduler) dispatch() {
	p := s.p
	if p.failed {
		return
	}
	s.round++
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
				pl.waitRound = s.round // it waits this round out
				continue
			}
		}
		j = g.jobs[0]
		if aheadOnly && buildsAt(j, pl) {
			pl.waitRound = s.round // it would build ahead: not this round
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
		pl.inflight = append(pl.inflight, j)
		pl.sent++
		j.seq = pl.sent
		pl.held.add(j.keys)
		p.setStatus(j, Running)
		t := task{id: uint64(j.id), fn: j.fn.name, arg: j.arg, keys: j.keys, timeout: j.timeout}
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

// rebalance revokes jobs that wait behind others at busy workers,
// one for each worker that has nothing to do and no revoke on its way
// already: the last job waiting at the busiest worker first, among those
// that need no cache item. (Moving a job that needs items would change
// what the workers hold: the busy worker's window would stop listing them
// and it might evict what its next jobs need; such jobs are sent ahead
// only where their items are resident, and wait there.) The worker hands
// a job back unless it has started it; the job is queued again when it
// comes back (revoked) and goes, most likely, to the idle worker.
func (s *scheduler) rebalance() {
	var idle []*place
	on := 0 // revokes on their way
	for _, pl := range s.places {
		if len(pl.inflight) == 0 && pl.waitRound != s.round && pl.kill == nil && s.canTake(pl) {
			idle = append(idle, pl)
		}
		for _, j := range pl.inflight {
			if j.revoking {
				on++
			}
		}
	}
	for range idle[min(on, len(idle)):] {
		from, last := s.busiest()
		if last == nil {
			return
		}
		last.revoking = true
		from.l.revoke(uint64(last.id), last.seq)
	}
}

// busiest returns the place with the most jobs waiting behind the
// one its worker runs that need no item (and none of them revoked
// already), and the last of those; or nil, nil.
func (s *scheduler) busiest() (*place, *job) {
	var from *place
	var last *job
	most := 0
	for _, pl := range s.places {
		if pl.l == nil || pl.stopping || pl.kill != nil || len(pl.inflight) < 2 {
			continue
		}
		n, l := 0, (*job)(nil)
		for _, j := range pl.inflight[1:] {
			if !j.revoking && !j.cancelled && j.Status() == Running && len(j.keys) == 0 {
				n, l = n+1, j
			}
		}
		if n > most {
			from, most, last = pl, n, l
		}
	}
	return from, last
}

// pick returns the place whose worker should take the next job, or
// nil: the one with the fewest jobs in flight among those that may take one
// more; and whether it may take it only ahead of the one it runs, if the
// job builds nothing there (canTakeHow).
func (s *scheduler) pick() (best *place, aheadOnly bool) {
	for _, pl := range s.places {
		if pl.waitRound == s.round {
			continue
		}
		ok, ahead := s.canTakeHow(pl)
		if ok && (best == nil || len(pl.inflight) < len(best.inflight)) {
			best, aheadOnly = pl, ahead
		}
	}
	return best, aheadOnly
}

func (s *scheduler) canTake(pl *place) bool {
	ok, _ := s.canTakeHow(pl)
	return ok
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
	if len(pl.inflight) >= maxInFlight {
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
// jobs take less than fastJob on average, and their summed average times:
// worked out once a dispatch round for a place, then as jobs are added.
func (s *scheduler) load(pl *place) (fast bool, queued time.Duration) {
	if pl.load.round != s.round || pl.load.n > len(pl.inflight) {
		pl.load.round, pl.load.n, pl.load.fast, pl.load.queued = s.round, 0, true, 0
	}
	for _, j := range pl.inflight[pl.load.n:] {
		t, ok := s.fnTime[j.fn]
		if !ok || t >= fastJob {
			pl.load.fast = false
		}
		pl.load.queued += t
	}
	pl.load.n = len(pl.inflight)
	return pl.load.fast, pl.load.queued
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
