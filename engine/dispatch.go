package engine

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// The scheduler: it publishes the required set, sends Queued jobs to the
// workers that can take them, and handles what the workers say, until the
// pool ends. It knows workers only through the transport seam
// (transport.go) and the window only as a publisher (window.go).

// crashLoopLimit is how many workers in a row may die without having run
// a job (before the handshake, or after it while they had no job; see
// diedLocked) before the pool starts no more workers: a program that never
// calls Init, or whose start-up fails, then makes Run fail within seconds
// instead of starting workers forever. A worker that dies under a job does
// not count: that death is the job's (Aborted, or retried), and the jobs
// bound how often it can happen.
const crashLoopLimit = 5

// Dispatch: a worker is sent a job while it still has others only when all
// of those are of functions whose jobs take less than fastJob on average,
// and together about less than inFlightBudget, and never more than
// maxInFlight at once; or, one job ahead of the one it runs, when that
// one's function takes less than aheadJob on average and it has not run
// for longer than that, and the job sent ahead builds nothing (every item
// it needs is resident in that worker, as last reported: a build sent
// ahead would start while the window still lists the running job's items,
// and the worker would hold both). Short jobs thus stream to a worker
// without waiting for a round trip each, and the worker does not fall
// idle between them (waking a Go process from idle costs more than the
// round trip); long jobs go one at a time to whichever worker is free. A
// worker that has nothing to do while jobs that need no cache item wait
// behind others' takes one of them back: the parent revokes the last such
// job waiting at the busiest worker, which hands it back unless it has
// started it (rebalanceLocked), so that such a job does not wait behind a
// job that turned out long.
const (
	fastJob        = 200 * time.Microsecond
	inFlightBudget = time.Millisecond
	maxInFlight    = 64
	aheadJob       = 100 * time.Millisecond
)

// scheduler is the state of one Run. Its goroutine alone runs its methods,
// with p.mu held where they say so; places are also read by Pool.Stats.
type scheduler struct {
	p    *Pool
	tr   transport
	msgs chan msg

	// perWorker: each place has a window of its own (EvictStale), which
	// lists the unsent jobs' keys and those of the jobs in flight there;
	// otherwise every place reads shared, which lists the keys of every
	// unfinished job.
	perWorker bool
	shared    publisher

	places    []*place
	byLink    map[link]*place
	lastIndex int

	fnTime  map[*funcEntry]time.Duration // average run time, per function
	fatal   error
	publish []uint64
	cands   []*readyGroup
	round   uint64 // numbers the dispatch rounds

	// bound is how many places the scheduler may make for workers it
	// starts (Workers, InProcess), own how many it made, eager how many
	// of those it makes at once (the serial worker); it makes the others
	// as jobs wait for a worker (growLocked). starts are the places whose
	// worker the loop starts once it has let go of p.mu: new places, and
	// those whose worker died.
	bound, own, eager int
	starts            []*place
	// earlyDeaths counts the workers that died, one after the other,
	// without having run a job, and helloDeaths those of them that had
	// answered the handshake; at crashLoopLimit, crashLoop says why no
	// worker is started any more.
	earlyDeaths, helloDeaths int
	crashLoop                error
	// lastAwake is when the loop last checked the running jobs.
	lastAwake time.Time
	// sharedOver: the shared window is overflowed.
	sharedOver bool

	// Memory over time, from the workers' reports: since acctAt the
	// workers' caches held cacheSum bytes, staleBytes of them in items no
	// unfinished job needs; peakSum is the largest cacheSum, staleSeconds
	// the integral of staleBytes over time.
	acctAt       time.Time
	cacheSum     int64
	staleBytes   int64
	peakSum      int64
	staleSeconds float64
	// noneSince: with RemoteOnly, since when the pool has had jobs left
	// and no live worker; zero if it has one.
	noneSince time.Time
}

// account brings the memory figures up to now, after the workers' reports
// or the set of needed items changed. p.mu is held.
func (s *scheduler) account(now time.Time) {
	if !s.acctAt.IsZero() {
		s.staleSeconds += float64(s.staleBytes) * now.Sub(s.acctAt).Seconds()
	}
	s.acctAt = now
	s.cacheSum, s.staleBytes = 0, 0
	for _, pl := range s.places {
		s.cacheSum += pl.cur.Bytes
		for k, b := range pl.resident {
			if !s.p.refs.has(k) {
				s.staleBytes += b
			}
		}
	}
	s.peakSum = max(s.peakSum, s.cacheSum)
}

func newScheduler(p *Pool, tr transport, msgs chan msg) *scheduler {
	return &scheduler{p: p, tr: tr, msgs: msgs, perWorker: p.cfg.evict == EvictStale,
		byLink: map[link]*place{}, fnTime: map[*funcEntry]time.Duration{}}
}

// start publishes the first required set and starts the schedulers given
// before Run. The loop starts the workers: eager of them at once, and the
// others, up to n in all, as jobs wait for them (growLocked).
func (s *scheduler) start(n, eager int) error {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sched = s
	s.bound, s.eager = n, min(eager, n)
	if !s.perWorker {
		w, err := s.tr.newWindow()
		if err != nil {
			return err
		}
		s.shared = w
	}
	s.publishLocked()
	p.setState(PoolRunning)
	for _, fn := range p.pendGo {
		p.startGo(fn)
	}
	p.pendGo = nil
	return nil
}

// publishLocked publishes the windows whose sets changed. p.mu is held.
func (s *scheduler) publishLocked() {
	p := s.p
	if !s.perWorker {
		// The pool-wide set, listed once: in the shared window, and in
		// the windows of their own that workers which joined by themselves
		// (on other hosts) read.
		listed := false
		keys := func() []uint64 {
			if !listed {
				s.publish, listed = appendKeys(s.publish[:0], p.refs.n), true
			}
			return s.publish
		}
		if p.refs.changed && s.shared != nil {
			s.overflow(&s.sharedOver, s.shared.publish(keys()), 0, len(s.publish))
		}
		for _, pl := range s.places {
			if pl.removed || pl.win == s.shared || !(p.refs.changed || pl.held.changed) {
				continue
			}
			s.overflow(&pl.overflowed, pl.win.publish(keys()), pl.index, len(s.publish))
			pl.held.changed = false
		}
		p.refs.changed = false
		return
	}
	all := p.unsent.changed
	for _, pl := range s.places {
		if pl.removed || !(all || pl.held.changed) {
			continue
		}
		s.publish = appendKeys(s.publish[:0], p.unsent.n)
		for k := range pl.held.n {
			if !p.unsent.has(k) {
				s.publish = append(s.publish, k)
			}
		}
		s.overflow(&pl.overflowed, pl.win.publish(s.publish), pl.index, len(s.publish))
		pl.held.changed = false
	}
	p.unsent.changed = false
}

// overflow reports a window's going over its capacity, or fitting again:
// *was is whether it was over, and becomes over. p.mu is held.
func (s *scheduler) overflow(was *bool, over bool, worker, items int) {
	if over == *was {
		return
	}
	*was = over
	kind := WindowFits
	if over {
		kind = WindowOverflow
	}
	s.p.emit(Event{Kind: kind, Worker: worker, Items: items, Capacity: s.p.cfg.capacity})
}

func appendKeys(dst []uint64, m map[uint64]int32) []uint64 {
	for k := range m {
		dst = append(dst, k)
	}
	return dst
}

// loop dispatches jobs and handles the workers' messages until every job has
// finished and every scheduler has returned, ctx ends, or the pool cannot
// go on (no worker can be started).
func (s *scheduler) loop(ctx context.Context, stopSchedulers context.CancelFunc) error {
	p := s.p
	var tick *time.Timer
	var tickC <-chan time.Time
	if p.cfg.tick > 0 && p.cfg.listener != nil {
		tick = time.NewTimer(p.cfg.tick)
		defer tick.Stop()
		tickC = tick.C
	}
	check := time.NewTimer(time.Hour)
	check.Stop()
	defer check.Stop()
	var checkAt time.Time // when check fires, if it is set
	for {
		p.mu.Lock()
		now := time.Now()
		s.checkHandshakes(now)
		s.checkRunning(now)
		s.checkWorkersLocked(now)
		if s.fatal != nil {
			p.mu.Unlock()
			return s.fatal
		}
		if p.failed {
			stopSchedulers()
		}
		if p.open == 0 && p.activeGo == 0 {
			p.mu.Unlock()
			return nil
		}
		s.publishLocked()
		s.dispatchLocked()
		s.growLocked()
		if len(s.starts) > 0 {
			starts := s.starts
			s.starts = nil
			p.mu.Unlock()
			s.startWorkers(starts)
			continue // their places may take jobs, or need windows published
		}
		if tick != nil {
			tick.Reset(time.Until(p.lastEvent.Add(p.cfg.tick)))
		}
		// The timer is set again only when the next check comes sooner
		// than the one it holds, or that one has passed (a check that comes
		// early finds nothing and sets it again).
		if at := s.nextCheck(now); !at.IsZero() && (checkAt.IsZero() || at.Before(checkAt) || !checkAt.After(now)) {
			check.Reset(at.Sub(now))
			checkAt = at
		}
		p.mu.Unlock()

		select {
		case m := <-s.msgs:
			p.mu.Lock()
			s.handleLocked(m)
			// Take whatever else has arrived before dispatching again.
			for more := true; more; {
				select {
				case m := <-s.msgs:
					s.handleLocked(m)
				default:
					more = false
				}
			}
			s.account(time.Now())
			p.mu.Unlock()
		case <-p.wake:
		case <-check.C:
		case <-tickC:
			p.mu.Lock()
			if !time.Now().Before(p.lastEvent.Add(p.cfg.tick)) {
				p.emit(Event{Kind: TickEvent})
			}
			p.mu.Unlock()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// dispatchLocked sends Queued jobs to workers that can take them. p.mu is held.
func (s *scheduler) dispatchLocked() {
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
		pl, aheadOnly := s.pickLocked()
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
		pl.tasks = append(pl.tasks, t)
	}
	s.rebalanceLocked()
	// The windows list the jobs' keys as in flight on their workers before
	// the jobs are sent, stamped with that generation: a worker that sees
	// any generation from then on keeps what its jobs need.
	s.publishLocked()
	for _, pl := range s.places {
		if len(pl.tasks) > 0 {
			gen := pl.win.gen()
			for i := range pl.tasks {
				pl.tasks[i].gen = gen
			}
			pl.l.send(pl.tasks)
			clear(pl.tasks)
			pl.tasks = pl.tasks[:0]
		}
	}
}

// rebalanceLocked revokes jobs that wait behind others at busy workers,
// one for each worker that has nothing to do and no revoke on its way
// already: the last job waiting at the busiest worker first, among those
// that need no cache item. (Moving a job that needs items would change
// what the workers hold: the busy worker's window would stop listing them
// and it might evict what its next jobs need; such jobs are sent ahead
// only where their items are resident, and wait there.) The worker hands
// a job back unless it has started it; the job is queued again when it
// comes back (revokedLocked) and goes, most likely, to the idle worker.
// p.mu is held.
func (s *scheduler) rebalanceLocked() {
	var idle []*place
	on := 0 // revokes on their way
	for _, pl := range s.places {
		if len(pl.inflight) == 0 && pl.waitRound != s.round && pl.kill == nil && s.canTakeLocked(pl) {
			idle = append(idle, pl)
		}
		for _, j := range pl.inflight {
			if j.revoking {
				on++
			}
		}
	}
	for range idle[min(on, len(idle)):] {
		from, last := s.busiestLocked()
		if last == nil {
			return
		}
		last.revoking = true
		from.l.revoke(uint64(last.id), last.seq)
	}
}

// busiestLocked returns the place with the most jobs waiting behind the
// one its worker runs that need no item (and none of them revoked
// already), and the last of those; or nil, nil. p.mu is held.
func (s *scheduler) busiestLocked() (*place, *job) {
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

// pickLocked returns the place whose worker should take the next job, or
// nil: the one with the fewest jobs in flight among those that may take one
// more; and whether it may take it only ahead of the one it runs, if the
// job builds nothing there (canTakeHowLocked).
func (s *scheduler) pickLocked() (best *place, aheadOnly bool) {
	for _, pl := range s.places {
		if pl.waitRound == s.round {
			continue
		}
		ok, ahead := s.canTakeHowLocked(pl)
		if ok && (best == nil || len(pl.inflight) < len(best.inflight)) {
			best, aheadOnly = pl, ahead
		}
	}
	return best, aheadOnly
}

func (s *scheduler) canTakeLocked(pl *place) bool {
	ok, _ := s.canTakeHowLocked(pl)
	return ok
}

// canTakeHowLocked reports whether pl's worker may be sent one more job,
// and whether only one ahead of the job it runs that builds nothing (see
// the dispatch rules above).
func (s *scheduler) canTakeHowLocked(pl *place) (ok, aheadOnly bool) {
	if pl.l == nil || !pl.ready || pl.stopping {
		return false, false
	}
	if len(pl.inflight) == 0 {
		return true, false
	}
	if len(pl.inflight) >= maxInFlight {
		return false, false
	}
	var queued time.Duration
	fast := true
	for _, j := range pl.inflight {
		t, ok := s.fnTime[j.fn]
		if !ok || t >= fastJob {
			fast = false
			break
		}
		queued += t
	}
	if fast && queued < inFlightBudget {
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

// handleLocked takes one message from a worker. p.mu is held.
func (s *scheduler) handleLocked(m msg) {
	pl := s.byLink[m.from]
	if pl == nil {
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
	pl.heard = time.Now()
	switch {
	case m.hello != nil:
		s.hello(pl, m.hello)
	case m.replies != nil:
		for _, rep := range m.replies {
			s.doneLocked(pl, rep)
		}
	case m.state != nil && pl.saidBye:
		// Older than the goodbye's statistics: nothing to take.
	case m.state != nil:
		pl.cur = m.state.stats
		pl.evicted += uint64(m.state.evicted)
		pl.setResident(m.state.resident)
	case m.bye != nil:
		pl.cur = m.bye.stats
		pl.peakRSS = max(pl.peakRSS, m.bye.peakRSS)
		pl.resident = nil
		pl.saidBye = true
	case m.died != nil:
		s.diedLocked(pl, m.died, m.lastWords)
	}
}

func (s *scheduler) doneLocked(pl *place, rep *reply) {
	p := s.p
	if rep.id == 0 || rep.id > uint64(len(p.jobs)) {
		return
	}
	j := p.jobs[rep.id-1]
	if i := slices.Index(pl.inflight, j); i >= 0 {
		pl.inflight = slices.Delete(pl.inflight, i, i+1)
		pl.held.drop(j.keys)
		if i == 0 && len(pl.inflight) > 0 {
			pl.inflight[0].runSince = time.Now() // the next starts
		}
	}
	j.revoking = false
	if rep.outcome == outcomeRevoked {
		s.revokedLocked(pl, j)
		return
	}
	if rep.outcome == outcomeLeft {
		// Its worker is leaving: not the job's failure. Aborted (or run
		// again, with retries), as when a worker dies under its job.
		if j.Status() == Running {
			s.runEnded(pl, j, fmt.Errorf("left the pool while the job ran (asked to stop); the job returned: %s", rep.payload), pl.stopping)
		}
		return
	}
	pl.jobs++
	if pl.served++; pl.served == 1 {
		s.earlyDeaths, s.helloDeaths = 0, 0 // a new worker serves: no crash loop
	}
	pl.evicted += uint64(rep.evicted)
	pl.budgetEvicted += uint64(rep.budgetEvicted)
	// What the workers held together when the job returned, before its
	// worker's policy cleared anything.
	// (From the places' last reports: cacheSum may be older, when this
	// reply came in a batch after other reports.)
	held := rep.held
	for _, o := range s.places {
		if o != pl {
			held += o.cur.Bytes
		}
	}
	s.peakSum = max(s.peakSum, held)
	pl.cur = rep.stats
	if rep.residentSent {
		pl.setResident(rep.resident)
	}
	if rep.overBudget {
		p.emit(Event{Kind: BudgetExceeded, JobID: j.id, Func: j.fn.name, Labels: j.labels, Worker: pl.index})
	}
	if t, ok := s.fnTime[j.fn]; ok {
		s.fnTime[j.fn] = t - t/8 + rep.elapsed/8
	} else {
		s.fnTime[j.fn] = rep.elapsed
	}
	if j.Status() != Running {
		return // ended meanwhile (the pool was stopped)
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
	s.ended(pl, j, j.started, j.ended, st, err)
	p.finish(j, st, err)
}

// ended records the end of j's run on the worker of pl: its last, which
// the job's own fields describe (see Job.Attempts), unless it is retried.
// p.mu is held.
func (s *scheduler) ended(pl *place, j *job, start, end time.Time, st Status, err error) {
	j.pid, j.started, j.ended = pl.pid, start, end
}

// retried records the end of j's run on the worker of pl, which is to be
// run again. p.mu is held.
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
		switch {
		case !pl.ready:
			pl.l.terminate(0) // it never served: no cache to clear
		case err != nil:
			pl.l.terminate(terminateGrace)
		default:
			pl.l.stop()
		}
	}
	p.mu.Unlock()

	deadline := time.NewTimer(stopTimeout)
	defer deadline.Stop()
	for live > 0 {
		select {
		case m := <-s.msgs:
			p.mu.Lock()
			if pl := s.byLink[m.from]; m.died != nil && pl != nil {
				live--
			}
			s.handleLocked(m)
			s.account(time.Now())
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
