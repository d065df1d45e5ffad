package engine

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// The workers' health, for the scheduler (scheduler.go): running jobs past
// their timeout or cancelled, workers that are silent or late with their
// handshake, and workers that die, the crash loop included.

// cancelRunning asks the worker that runs j to cancel it, and reports
// whether it could (a worker holds j's place).
func (s *scheduler) cancelRunning(j *job, reason string) bool {
	if j.worker < 1 || j.worker > len(s.places) {
		return false
	}
	pl := s.places[j.worker-1]
	i := slices.Index(pl.inflight, j)
	if pl.l == nil || i < 0 {
		return false
	}
	if i > 0 && revocable(j) {
		pl.revocable--
	}
	j.cancelled, j.cancelReason, j.cancelAt = true, reason, time.Now()
	pl.l.cancel(uint64(j.id))
	s.placeChanged(pl) // a deadline for the cancel
	return true
}

// checkRunning kills the workers whose running job is past its timeout,
// or was cancelled, and has not returned within the grace period since;
// and those that have said nothing for longer than the silence limit
// while they had jobs. Before firstDeadline, none has.
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
	if s.firstDeadline.IsZero() || !now.After(s.firstDeadline) {
		return
	}
	s.firstDeadline = time.Time{}
	for _, pl := range s.places {
		if !pl.in.busy {
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
		default:
			s.firstDeadline = sooner(s.firstDeadline, s.deadline(pl))
		}
	}
}

// deadline returns when checkRunning may next kill the worker of pl, which
// is busy: the first of its running job's timeout and grace, its cancel's
// grace, and the end of its silence limit. Each of them only moves later
// but when the running job changes or is cancelled (placeChanged).
func (s *scheduler) deadline(pl *place) time.Time {
	cfg := &s.p.cfg
	j := pl.inflight[0]
	at := pl.heard.Add(cfg.silence)
	if j.timeout > 0 {
		at = sooner(at, j.runSince.Add(j.timeout+cfg.grace))
	}
	if j.cancelled {
		at = sooner(at, later(j.cancelAt, j.runSince).Add(cfg.grace))
	}
	return at
}

// kill kills the worker of pl now, for the reason k.
func (s *scheduler) kill(pl *place, k *killing) {
	pl.kill = k
	pl.l.terminate(0)
	s.placeChanged(pl)
}

// nextCheck returns when checkRunning has something to check next (zero:
// nothing): a timeout's or a cancel's grace, a worker's silence (firstDeadline,
// which may come sooner: a check then finds nothing, and sets it again);
// and, while workers have jobs, every quarter of the silence limit, so
// that a longer gap means that this process did not run.
func (s *scheduler) nextCheck(now time.Time) time.Time {
	cfg := &s.p.cfg
	var at time.Time
	if s.busy > 0 {
		at = sooner(s.firstDeadline, now.Add(cfg.silence/4))
	}
	if !s.noneSince.IsZero() {
		at = sooner(at, s.noneSince.Add(cfg.remoteOnly))
	}
	if !at.IsZero() {
		at = at.Add(time.Millisecond) // past it, not at it
	}
	return at
}

// checkWorkers fails a RemoteOnly pool that has had jobs left and no
// live worker for longer than its wait.
func (s *scheduler) checkWorkers(now time.Time) {
	wait := s.p.cfg.remoteOnly
	if wait <= 0 || s.fatal != nil {
		return
	}
	live := s.linked > 0
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

// sooner returns the earlier of a and b, where a zero time is none.
func sooner(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// died handles the end of a worker: the job it was running is
// Aborted, the jobs waiting behind it go back to the queue, and, while the
// pool runs, a new worker takes the place of one the scheduler started.
//
// A worker process that exited before the handshake with the status of
// one whose main reached New without calling Init (checkInit) stops the
// pool at once with ErrNoInit: every other worker would do the same.
//
// A worker that died without having run a job counts towards a crash
// loop: one that died before the handshake, or after it with no job, and
// was neither asked to stop nor killed. The count restarts when a new
// worker finishes its first job. At crashLoopLimit in a row no worker is
// started any more, and Run's error says so, with what the last one
// printed (and a word on Init when none of them answered the handshake).
// The pool goes on with the workers that serve; with none, it ends. A worker that dies under a job
// does not count: the job is Aborted or retried, and the worker replaced.
func (s *scheduler) died(pl *place, why error, lastWords string) {
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
	case !wasReady && !stopping && !pl.joined && errors.Is(why, exitStatus(exitNoInit)):
		// Every worker is this program: none would serve.
		if s.fatal == nil {
			s.fatal = fmt.Errorf("engine: %w: %v ran main again and reached engine.New instead of serving jobs (it exited with status %d before the handshake); %s",
				ErrNoInit, pl, exitNoInit, initAdvice)
		}
		pl.removed = true
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
			s.countEarlyDeath(pl, why, wasReady, lastWords)
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
	for _, j := range pl.inflight {
		if j.revoking {
			s.revoking--
		}
	}
	pl.inflight = pl.inflight[:0]
	pl.funcs = pl.funcs[:0]
	pl.revocable = 0
	if pl.joined || s.crashLoop != nil && !stopping {
		pl.removed = true
	}
	s.placeChanged(pl)
	if s.crashLoop != nil && s.fatal == nil && !stopping && p.state == PoolRunning && s.live() == 0 {
		s.fatal = fmt.Errorf("engine: no worker left: %w: none is started since %d died in a row (see below)", ErrCrashLoop, crashLoopLimit)
	}
	if pl.removed || stopping || s.fatal != nil || p.state != PoolRunning {
		return
	}
	pl.refill = true
	s.starts = append(s.starts, pl)
}

// countEarlyDeath stops the starts of workers after crashLoopLimit of them
// died in a row without having run a job, the last of them that of pl
// (for why, having answered the handshake or not, its stderr ending with
// lastWords). With no other worker that serves, the pool ends; else the
// error joins Run's and the pool goes on.
func (s *scheduler) countEarlyDeath(pl *place, why error, wasReady bool, lastWords string) {
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

// revoked takes back j, which the worker of pl handed back without
// starting it (rebalance): it is queued again, where its id puts it
// before the jobs queued after it, unless it was cancelled meanwhile.
func (s *scheduler) revoked(pl *place, j *job) {
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
// or queues it again (Retries).
func (s *scheduler) runEnded(pl *place, j *job, why error, stopping bool) {
	p := s.p
	now := time.Now()
	st, err := Aborted, error(fmt.Errorf("%w: %v %v", ErrWorkerDied, pl, why))
	switch k := pl.kill; {
	case k != nil && k.j == j:
		if k.st == Failed && s.retryFailed(pl, j, j.runSince, now, k.err) {
			return // past its timeout: run again (RetryFailures)
		}
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
