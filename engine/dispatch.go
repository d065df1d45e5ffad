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

// cancelRunning asks the worker that runs j to cancel it, and reports
// whether it could (a worker holds j's place). p.mu is held.
func (s *scheduler) cancelRunning(j *job, reason string) bool {
	for _, pl := range s.places {
		if pl.index == j.worker && pl.l != nil && slices.Contains(pl.inflight, j) {
			j.cancelled, j.cancelReason, j.cancelAt = true, reason, time.Now()
			pl.l.cancel(uint64(j.id))
			return true
		}
	}
	return false
}

// checkRunning kills the workers whose running job is past its timeout,
// or was cancelled, and has not returned within the grace period since;
// and those that have said nothing for longer than the silence limit
// while they had jobs. p.mu is held.
func (s *scheduler) checkRunning(now time.Time) {
	cfg := &s.p.cfg
	if !s.lastAwake.IsZero() && now.Sub(s.lastAwake) > cfg.silence/2 {
		// This process did not run for a while (it was stopped, or the
		// machine slept; nextCheck wakes it more often while workers
		// have jobs): the workers' silence meanwhile says nothing.
		for _, pl := range s.places {
			pl.heard = later(pl.heard, now)
		}
	}
	s.lastAwake = now
	for _, pl := range s.places {
		if pl.l == nil || !pl.ready || pl.stopping || pl.kill != nil || len(pl.inflight) == 0 {
			continue
		}
		j := pl.inflight[0]
		switch {
		case j.timeout > 0 && now.After(j.runSince.Add(j.timeout+cfg.grace)):
			s.kill(pl, &killing{j: j, st: Failed, err: &TimeoutError{Timeout: j.timeout, Killed: true, Grace: cfg.grace}})
		case j.cancelled && now.After(later(j.cancelAt, j.runSince).Add(cfg.grace)):
			s.kill(pl, &killing{j: j, st: Cancelled, err: &CancelledError{Reason: j.cancelReason}})
		case now.Sub(pl.heard) > cfg.silence:
			s.kill(pl, &killing{silent: true})
		}
	}
}

// kill kills the worker of pl now, for the reason k. p.mu is held.
func (s *scheduler) kill(pl *place, k *killing) {
	pl.kill = k
	pl.l.terminate(0)
}

// nextCheck returns when checkRunning has something to check next (zero:
// nothing): a timeout's or a cancel's grace, a worker's silence; and,
// while workers have jobs, every quarter of the silence limit, so that a
// longer gap means that this process did not run. p.mu is held.
func (s *scheduler) nextCheck(now time.Time) time.Time {
	cfg := &s.p.cfg
	var at time.Time
	sooner := func(t time.Time) {
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	for _, pl := range s.places {
		if pl.l == nil || !pl.ready || pl.stopping || pl.kill != nil || len(pl.inflight) == 0 {
			continue
		}
		j := pl.inflight[0]
		if j.timeout > 0 {
			sooner(j.runSince.Add(j.timeout + cfg.grace))
		}
		if j.cancelled {
			sooner(later(j.cancelAt, j.runSince).Add(cfg.grace))
		}
		sooner(pl.heard.Add(cfg.silence))
		sooner(now.Add(cfg.silence / 4))
	}
	if !s.noneSince.IsZero() {
		sooner(s.noneSince.Add(cfg.remoteOnly))
	}
	if !at.IsZero() {
		at = at.Add(time.Millisecond) // past it, not at it
	}
	return at
}

// checkWorkersLocked fails a RemoteOnly pool that has had jobs left and no
// live worker for longer than its wait. p.mu is held.
func (s *scheduler) checkWorkersLocked(now time.Time) {
	wait := s.p.cfg.remoteOnly
	if wait <= 0 || s.fatal != nil {
		return
	}
	live := false
	for _, pl := range s.places {
		if pl.l != nil && !pl.removed {
			live = true
			break
		}
	}
	switch {
	case live || s.p.open == 0:
		s.noneSince = time.Time{}
	case s.noneSince.IsZero():
		s.noneSince = now
	case now.Sub(s.noneSince) > wait:
		if len(s.places) == 0 {
			s.fatal = fmt.Errorf("engine: %w joined within %v", ErrNoWorkers, wait)
		} else {
			s.fatal = fmt.Errorf("engine: %w for %v: the workers that had joined are gone", ErrNoWorkers, wait)
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// diedLocked handles the end of a worker: the job it was running is
// Aborted, the jobs waiting behind it go back to the queue, and, while the
// pool runs, a new worker takes the place of one the scheduler started.
//
// A worker that died without having run a job (before the handshake, or
// after it while it had no job), neither asked to stop nor killed, counts
// towards a crash loop, until a new worker finishes its first job: at
// crashLoopLimit of them in a row no worker is started any more, and Run's
// error says so, with what the last one printed (and, when none of them
// had answered the handshake, a word on Init). The pool goes on with the
// workers that serve; with none, it ends. A worker that dies under a job
// does not count: the job is Aborted or retried, and the worker replaced.
// p.mu is held.
func (s *scheduler) diedLocked(pl *place, why error, lastWords string) {
	p := s.p
	wasReady, stopping, timedOut, k := pl.ready, pl.stopping, pl.timedOut, pl.kill
	hadJob := len(pl.inflight) > 0
	if k != nil && k.silent {
		why = fmt.Errorf("was killed: it had jobs and sent nothing for %v (stopped, say, or its reply pipe in disorder)", p.cfg.silence)
	}
	// A worker that said goodbye without being asked to stop left the
	// pool (asked to stop by its own signal): it started none of the jobs
	// it still had.
	left := pl.saidBye && !stopping
	if left {
		why = errLeft
	}
	if !pl.saidBye || left {
		p.emit(Event{Kind: WorkerDied, Worker: pl.index, PID: pl.pid, Err: why})
	}
	s.left(pl)
	switch {
	case left:
	case timedOut:
		p.errs = append(p.errs, fmt.Errorf("engine: %v did not answer the handshake within %v and was killed", pl, p.cfg.startTimeout))
		pl.removed = true
		if s.live() == 0 && s.fatal == nil && !stopping {
			s.fatal = fmt.Errorf("engine: no worker left: %v did not answer the handshake within %v (does main call engine.Init() first?)", pl, p.cfg.startTimeout)
		}
	case !stopping && !pl.joined && k == nil && !hadJob && pl.served == 0 && s.fatal == nil && s.crashLoop == nil:
		s.earlyDeaths++
		if wasReady {
			s.helloDeaths++
		}
		if s.earlyDeaths >= crashLoopLimit {
			s.crashLoopLocked(pl, why, wasReady, lastWords)
		}
	}
	for i, j := range pl.inflight {
		if j.Status() != Running {
			continue
		}
		if i == 0 && !left {
			s.runEnded(pl, j, why, stopping)
			continue
		}
		// It never started: back to the queue, where its id puts it
		// before the jobs queued after it.
		j.tries--
		p.setStatus(j, Queued)
		p.queue.push(j)
	}
	pl.inflight = pl.inflight[:0]
	if pl.joined || s.crashLoop != nil && !stopping {
		pl.removed = true
	}
	if s.crashLoop != nil && s.fatal == nil && !stopping && p.state == PoolRunning && s.live() == 0 {
		s.fatal = fmt.Errorf("engine: no worker left: %w: none is started since %d died in a row (see below)", ErrCrashLoop, crashLoopLimit)
	}
	if pl.removed || stopping || s.fatal != nil || p.state != PoolRunning {
		return
	}
	pl.refill = true
	s.starts = append(s.starts, pl)
}

// crashLoopLocked stops the starts of workers after crashLoopLimit of them
// died in a row without having run a job, the last of them that of pl
// (for why, having answered the handshake or not, its stderr ending with
// lastWords). With no other worker that serves, the pool ends; else the
// error joins Run's and the pool goes on. p.mu is held.
func (s *scheduler) crashLoopLocked(pl *place, why error, wasReady bool, lastWords string) {
	when := "before the handshake"
	if wasReady {
		when = "after the handshake, with no job"
	}
	said := "; it printed nothing"
	if lastWords != "" {
		said = "; it last printed: " + lastWords
	}
	serving := 0
	for _, o := range s.places {
		if o.l != nil && o.ready && !o.stopping {
			serving++
		}
	}
	var hint, goesOn string
	if s.helloDeaths == 0 {
		hint = " (does main call engine.Init() first, and does the program start?)"
	}
	switch {
	case serving == 1:
		goesOn = "; no other worker is started: the pool goes on with the one that serves"
	case serving > 1:
		goesOn = fmt.Sprintf("; no other worker is started: the pool goes on with the %d that serve", serving)
	}
	err := fmt.Errorf("engine: %w: %d workers in a row died before they finished a job; the last, %v, %v %s%s%s%s",
		ErrCrashLoop, s.earlyDeaths, pl, why, when, said, hint, goesOn)
	s.crashLoop = err
	if serving == 0 {
		s.fatal = err
		return
	}
	s.p.errs = append(s.p.errs, err)
}

// revokedLocked takes back j, which the worker of pl handed back without
// starting it (rebalanceLocked): it is queued again, where its id puts it
// before the jobs queued after it, unless it was cancelled meanwhile.
// p.mu is held.
func (s *scheduler) revokedLocked(pl *place, j *job) {
	p := s.p
	if j.Status() != Running {
		return // ended meanwhile (the pool was stopped)
	}
	if j.cancelled {
		now := time.Now()
		err := &CancelledError{Reason: j.cancelReason}
		s.ended(pl, j, now, now, Cancelled, err)
		p.finish(j, Cancelled, err)
		return
	}
	j.tries--
	j.worker = 0
	p.setStatus(j, Queued)
	p.queue.push(j)
}

// runEnded ends j, which was running on the worker of pl when it went,
// or queues it again (Retries). p.mu is held.
func (s *scheduler) runEnded(pl *place, j *job, why error, stopping bool) {
	p := s.p
	now := time.Now()
	st, err := Aborted, error(fmt.Errorf("%w: %v %v", ErrWorkerDied, pl, why))
	switch k := pl.kill; {
	case k != nil && k.j == j:
		st, err = k.st, k.err
	case j.cancelled:
		st, err = Cancelled, &CancelledError{Reason: j.cancelReason}
	case stopping:
		err = fmt.Errorf("%w: %v %v", errStopped, pl, why)
	case j.retries > 0 && s.fatal == nil && p.state == PoolRunning:
		s.retried(pl, j, j.runSince, now, err)
		j.retries--
		j.err = err // for the event
		p.setStatus(j, Queued)
		j.err, j.worker = nil, 0
		p.queue.push(j)
		return
	}
	s.ended(pl, j, j.runSince, now, st, err)
	p.finish(j, st, err)
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

// Affinity: a worker that is free takes, among the oldest ready jobs of the
// first affinityGroups+1 groups of jobs that need the same items, the one
// it scores best (below), the oldest among equals; the oldest ready job of
// all may be passed over at most maxPassed times, then the next free worker
// takes it whatever it scores. So the choice looks past the oldest ready
// job only to the oldest jobs of at most 16 other item sets, and no job
// waits behind more than 64 later ones. (A small bound makes a worker that
// streams short jobs take a job whose items another, busy worker holds,
// and build them again.)
const (
	affinityGroups = 16
	maxPassed      = 64
)

// Scores of a group of jobs for a worker.
const (
	scoreElsewhere = iota // another worker holds or will hold some of its items
	scoreNowhere          // it needs items no worker holds: someone must build them
	scoreHere             // the worker holds (or will hold) all its items, or it needs none
)

// choose returns the group whose oldest job the worker of pl should take.
// p.mu is held.
func (s *scheduler) choose(pl *place) *readyGroup {
	q := &s.p.queue
	first := q.heads[0]
	sc := s.score(first, pl)
	head := first.jobs[0]
	if q.passedID != head.id {
		q.passedID, q.passed = head.id, 0
	}
	if sc == scoreHere || q.passed >= maxPassed {
		return first
	}
	s.cands = q.firstGroups(s.cands[:0], affinityGroups+1)
	best, bestScore := first, sc
	for _, g := range s.cands[1:] {
		if g.jobs[0].Status() != Queued {
			continue // dropped when its group reaches the front
		}
		if v := s.score(g, pl); v > bestScore {
			best, bestScore = g, v
			if v == scoreHere {
				break
			}
		}
	}
	clear(s.cands)
	if bestScore == scoreElsewhere && s.worthWaiting(best, pl) {
		return nil
	}
	if best != first {
		q.passed++
	}
	return best
}

// worthWaiting reports whether the worker of pl should rather wait than
// take a job of group g, whose items other workers hold: when those workers
// will have run the group's ready jobs sooner than pl's worker would build
// its items (by the workers' mean build time and the function's mean run
// time; never when either is unknown). p.mu is held.
func (s *scheduler) worthWaiting(g *readyGroup, pl *place) bool {
	t, ok := s.fnTime[g.jobs[0].fn]
	if !ok {
		return false
	}
	holders := 0
	var build time.Duration
	for _, o := range s.places {
		if o == pl || o.removed || o.l == nil {
			continue
		}
		if o.cur.Builds > 0 {
			build = max(build, o.cur.BuildTime/time.Duration(o.cur.Builds))
		}
		all := true
		for _, k := range g.keys {
			if !o.holds(k) {
				all = false
				break
			}
		}
		if all {
			holders++
		}
	}
	if holders == 0 || build == 0 {
		return false
	}
	return time.Duration(len(g.jobs))*t/time.Duration(holders) < build
}

// score rates group g for the worker of pl. p.mu is held.
func (s *scheduler) score(g *readyGroup, pl *place) int {
	here, elsewhere := 0, false
	for _, k := range g.keys {
		if pl.holds(k) {
			here++
			continue
		}
		for _, o := range s.places {
			if o != pl && !o.removed && o.holds(k) {
				elsewhere = true
				break
			}
		}
	}
	switch {
	case here == len(g.keys):
		return scoreHere
	case !elsewhere:
		return scoreNowhere
	}
	return scoreElsewhere
}

// evictionOrder lists the items the worker of pl holds, the one whose next
// use lies furthest ahead first: items no unfinished job needs, then items
// only jobs still waiting for their dependencies need, then items of ready
// jobs, later groups of the ready queue first. The worker evicts in this
// order when a build would take it past its budget. p.mu is held.
func (s *scheduler) evictionOrder(pl *place) []uint64 {
	const notReady = 1 << 30
	s.cands = s.p.queue.firstGroups(s.cands[:0], 64)
	type ranked struct {
		key  uint64
		rank int
	}
	rs := make([]ranked, 0, len(pl.resident))
	for k := range pl.resident {
		rank := notReady + 1 // needed by no job
		if s.p.refs.has(k) {
			rank = notReady
			for i, g := range s.cands {
				if slices.Contains(g.keys, k) {
					rank = i
					break
				}
			}
		}
		rs = append(rs, ranked{k, rank})
	}
	clear(s.cands)
	slices.SortFunc(rs, func(a, b ranked) int { return b.rank - a.rank })
	order := make([]uint64, len(rs))
	for i, r := range rs {
		order[i] = r.key
	}
	return order
}
