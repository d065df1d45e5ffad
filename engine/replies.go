package engine

import (
	"fmt"
	"slices"
	"time"
)

// handle takes one message from a worker, which came at now.
func (s *scheduler) handle(m msg, now time.Time) {
	if m.pull != nil {
		for _, m := range m.pull() {
			s.handle(m, now)
		}
		return
	}
	pl := s.byLink[m.from]
	if pl == nil {
		delete(s.admitted, m.from)
		if m.hello == nil {
			return // from a worker that has already been dealt with
		}
		if s.p.state != PoolRunning {
			m.from.terminate(0) // too late to join
			return
		}
		// A worker that joined by itself takes a new place.
		var err error
		if pl, err = s.addPlace(m.hello.win); err != nil {
			m.from.terminate(0)
			return
		}
		pl.joined = true
		s.attach(pl, m.from)
	}
	pl.heard = now
	switch {
	case m.hello != nil:
		s.hello(pl, m.hello)
	case m.notes != nil:
		changed := false
		for i := range m.notes {
			n := &m.notes[i]
			if n.started != 0 {
				at := now
				if n.at != 0 {
					at = time.Unix(0, n.at)
				}
				s.started(pl, n.started, at)
			}
			if n.ended && s.done(pl, &n.done, now) {
				changed = true
			}
		}
		if changed {
			s.placeChanged(pl) // once for the batch
		}
	case m.state != nil && pl.saidBye:
		// Older than the goodbye's statistics: nothing to take.
	case m.state != nil:
		s.items(pl, m.state.items)
		s.setCur(pl, m.state.stats)
		pl.evicted += uint64(m.state.evicted)
		s.setResident(pl, m.state.resident)
	case m.bye != nil:
		s.items(pl, m.bye.items)
		s.setCur(pl, m.bye.stats)
		pl.peakRSS = max(pl.peakRSS, m.bye.peakRSS)
		s.setResident(pl, nil)
		pl.saidBye = true
	case m.died != nil:
		s.died(pl, m.died, m.lastWords)
	}
}

// started records that job id began on the worker of pl at now.
func (s *scheduler) started(pl *place, id uint64, now time.Time) {
	p := s.p
	if id == 0 || id > uint64(len(p.jobs)) {
		return
	}
	j := p.jobs[id-1]
	if j.Status() != Running || j.worker != pl.index || !j.began.IsZero() {
		return
	}
	j.began = now
	if p.cfg.listener == nil {
		return
	}
	p.emit(Event{Kind: JobStarted, JobID: j.id, Func: j.fn.name, Labels: j.labels, Worker: pl.index, Attempt: j.tries})
}

// done takes the reply to a job that the worker of pl ran, or handed
// back, which came at now. It keeps nothing that points to rep. It reports
// whether the jobs in flight at pl changed: the caller then calls
// placeChanged, once for a batch of replies, before the scheduler looks
// at its sets of places again.
func (s *scheduler) done(pl *place, rep *reply, now time.Time) (changed bool) {
	p := s.p
	s.items(pl, rep.items)
	if rep.id == 0 || rep.id > uint64(len(p.jobs)) {
		return false
	}
	j := p.jobs[rep.id-1]
	if i := slices.Index(pl.inflight, j); i >= 0 {
		changed = true
		switch {
		case i > 0 && revocable(j):
			pl.revocable--
		case i == 0 && len(pl.inflight) > 1 && revocable(pl.inflight[1]):
			pl.revocable-- // the next starts
		}
		pl.dropInflight(i)
		pl.countFunc(j.fn, -1)
		s.dropHeld(pl, j.keys)
		if i == 0 && len(pl.inflight) > 0 {
			pl.inflight[0].runSince = now // the next starts
		}
		if j.revoking {
			j.revoking = false
			s.revoking--
		}
	}
	if rep.outcome == outcomeRevoked {
		s.revoked(pl, j)
		return changed
	}
	if rep.outcome == outcomeLeft {
		// Its worker is leaving: not the job's failure. Aborted (or run
		// again, with retries), as when a worker dies under its job.
		if j.Status() == Running {
			s.runEnded(pl, j, fmt.Errorf("left the pool while the job ran (asked to stop); the job returned: %s", rep.payload), pl.stopping)
		}
		return changed
	}
	pl.jobs++
	if pl.served++; pl.served == 1 {
		s.earlyDeaths, s.helloDeaths = 0, 0 // a new worker serves: no crash loop
	}
	pl.evicted += uint64(rep.evicted)
	pl.budgetEvicted += uint64(rep.budgetEvicted)
	// What the workers held together when the job returned, before its
	// worker's policy cleared anything: this one's figure, and the other
	// places' last reports (curSum, not cacheSum, which may be older when
	// this reply came in a batch after other reports).
	s.peakSum = max(s.peakSum, rep.held+s.curSum-pl.cur.Bytes)
	s.setCur(pl, rep.stats)
	if rep.residentSent {
		s.setResident(pl, rep.resident)
	}
	if rep.overBudget {
		p.emit(Event{Kind: BudgetExceeded, JobID: j.id, Func: j.fn.name, Labels: j.labels, Worker: pl.index})
	}
	t, ok := s.fnTime[j.fn]
	nt := rep.elapsed
	if ok {
		nt = t - t/8 + rep.elapsed/8
	}
	s.fnTime[j.fn] = nt
	if !ok || t >= fastJob && nt < fastJob || t >= aheadJob && nt < aheadJob {
		// Workers with jobs of fn in flight may take more now (canTakeHow).
		s.unblock()
	}
	if len(rep.undeclared) > 0 {
		s.learn(pl, j, rep.undeclared)
	}
	if j.Status() != Running {
		return changed // ended meanwhile (the pool was stopped)
	}
	j.started = rep.start
	j.ended = rep.start.Add(rep.elapsed)
	st, err := Failed, error(nil)
	switch rep.outcome {
	case outcomeOK:
		st = Succeeded
	case outcomePanic:
		err = &PanicError{Op: "job", Value: string(rep.payload), Stack: rep.stack}
	case outcomeTimedOut:
		err = &TimeoutError{Timeout: j.timeout, Returned: string(rep.payload)}
	case outcomeCancelled:
		st, err = Cancelled, &CancelledError{Reason: j.cancelReason}
	default:
		err = &RemoteError{Msg: string(rep.payload)}
	}
	if j.cancelled {
		st, err = Cancelled, &CancelledError{Reason: j.cancelReason}
	}
	if st == Succeeded {
		j.result = rep.payload
	}
	if st == Failed && s.retryFailed(pl, j, j.started, j.ended, err) {
		return changed
	}
	s.ended(pl, j, j.started, j.ended, st, err)
	p.finish(j, st, err)
	return changed
}

// ended records the end of j's run on the worker of pl: its last, which
// the job's own fields describe (see Job.Attempts), unless it is retried.
func (s *scheduler) ended(pl *place, j *job, start, end time.Time, st Status, err error) {
	j.pid, j.started, j.ended = pl.pid, start, end
}

// retried records the end of j's run on the worker of pl, which is to be
// run again.
func (s *scheduler) retried(pl *place, j *job, start, end time.Time, err error) {
	j.attempts = append(j.attempts, Attempt{Worker: pl.index, PID: pl.pid, Start: start, End: end, Status: Aborted, Err: err})
}

// shutdown ends the run: after a normal end the workers are asked to stop
// (they clear their caches and say goodbye); after a failure or the end of
// ctx (err != nil), the jobs not started are cancelled and the workers are
// terminated. It returns when every worker has gone.
func (s *scheduler) shutdown(err error) {
	p := s.p
	p.mu.Lock()
	p.setState(PoolStopping)
	if err != nil {
		for _, pl := range s.places {
			for i, j := range pl.inflight {
				if j.Status() != Running {
					continue
				}
				if i == 0 {
					err := fmt.Errorf("%w: worker %d was stopped: %w", errStopped, pl.index, err)
					s.ended(pl, j, j.runSince, time.Now(), Aborted, err)
					p.finish(j, Aborted, err)
				} else {
					p.finish(j, Cancelled, fmt.Errorf("pool stopped: %w", err))
				}
			}
		}
		for _, j := range p.jobs {
			if st := j.Status(); st == Pending || st == Queued {
				p.finish(j, Cancelled, fmt.Errorf("pool stopped: %w", err))
			}
		}
	}
	live := 0
	for _, pl := range s.places {
		if pl.l == nil {
			continue
		}
		live++
		pl.stopping = true
		s.placeChanged(pl)
		switch {
		case !pl.ready:
			pl.l.terminate(0) // it never served: no cache to clear
		case err != nil:
			pl.l.terminate(terminateGrace)
		default:
			pl.l.stop()
		}
	}
	for l := range s.admitted {
		l.terminate(0) // admitted as the pool ended: it gets no place
	}
	clear(s.admitted)
	p.mu.Unlock()

	deadline := time.NewTimer(stopTimeout)
	defer deadline.Stop()
	for live > 0 {
		select {
		case m := <-s.msgs:
			p.mu.Lock()
			now := time.Now()
			s.handle(m, now)
			s.account(now)
			live = 0
			for _, pl := range s.places {
				if pl.l != nil {
					live++
				}
			}
			p.mu.Unlock()
		case <-deadline.C:
			p.mu.Lock()
			for _, pl := range s.places {
				if pl.l != nil {
					pl.l.terminate(terminateGrace)
				}
			}
			p.mu.Unlock()
		}
	}
}
