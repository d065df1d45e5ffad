package engine

import (
	"context"
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
