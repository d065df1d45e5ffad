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
// a job before the pool starts no more workers. Such a death happens
// before the handshake, or after it while the worker had no job (see
// died). A program whose start-up fails then makes Run fail within
// seconds instead of starting workers forever. (A main that skipped Init
// is told sooner, at the first worker: ErrNoInit.) A worker that dies
// under a job does not count: that death is the job's (Aborted, or
// retried), and the jobs bound how often it can happen.
const crashLoopLimit = 5

// Dispatch: how many jobs a worker is sent at once.
//
//   - Streaming: a worker with jobs in flight is sent one more only if
//     every job in flight there is of a function that takes less than
//     fastJob on average; the jobs in flight then sum to about
//     inFlightBudget at most, and never number more than maxInFlight.
//   - One ahead: a worker running one job is also sent the next if that
//     job's function takes less than aheadJob on average, the job has not
//     run longer than that, and the job sent ahead builds nothing (all
//     its items are resident there, as last reported).
//   - Otherwise a job goes to a worker that runs none.
//
// Short jobs so stream to a worker without a round trip each, and the
// worker does not fall idle between them: waking an idle Go process costs
// more than the round trip. Long jobs go one at a time to whichever worker
// is free. A job sent ahead must build nothing because its build would
// start while the window still lists the running job's items, and the
// worker would hold both.
//
// A worker found unable to take one more job is looked at again when
// something changes at it (a job sent or ended, a cancel, its state), or
// when a function's average time is first known or falls below fastJob or
// aheadJob. It is not looked at as the averages merely drift: every busy
// worker would then be worth a look after every reply. So a worker at the
// budget takes one more job after its next reply.
//
// Rebalancing: a worker with nothing to do, while jobs that need no cache
// item wait behind others' jobs, takes one of them back. The parent
// revokes the last such job waiting at the busiest worker, which hands it
// back unless it has started it. So such a job does not wait behind one
// that turned out long.
//
// Nothing is sent ahead in a pool with a Capacity (the jobs counted are
// those that run) or with FailFast. A worker takes the job waiting for it
// the moment the one before ends, before the parent has heard of that
// end; a job sent ahead of one that fails would start after the failure.
const (
	fastJob        = 200 * time.Microsecond
	inFlightBudget = time.Millisecond
	maxInFlight    = 64
	aheadJob       = 100 * time.Millisecond
)

// scheduler is the state of one Run. Its methods run on its own goroutine
// (the loop's) with p.mu held, but for loop, deliver, startWorkers,
// closeWindows and shutdown, which take p.mu where they need it and say so:
// a method that does not say otherwise may assume the lock. Pool.Stats
// reads the places under p.mu from other goroutines.
type scheduler struct {
	p    *Pool
	tr   transport
	msgs chan msg

	// perWorker: each place has a window of its own (EvictStale), which
	// lists the unsent jobs' keys and those of the jobs in flight there;
	// otherwise every place reads shared, which lists the keys of every
	// unfinished job.
	perWorker bool
	shared    *window
	// This round's publications and the places with tasks to send, for
	// deliver; overs are the publications' overflows.
	pubs    []publication
	sending []*place
	overs   []bool

	// places[i] has index i+1: a place is never taken out of places.
	places []*place
	byLink map[link]*place
	// admitted holds the links that Admit started and that have no place
	// yet (their hello has not come): shutdown ends them, as nothing
	// reads their messages once Run has returned.
	admitted  map[link]bool
	lastIndex int

	// The places by what their workers may do, as placeChanged keeps them
	// (places.go), so that a dispatch round, a reply or a check costs time
	// in proportion to the places that changed, not to all of them.
	// takers are the places whose worker may take one more job, as far as
	// the scheduler knows, in the order pick takes them; waiting those that
	// wait this round (out of takers until the next); donors those with
	// jobs that rebalance may take back, in the order busiest takes them.
	// free counts the serving places with no job in flight, busy those
	// with jobs (checkRunning's), soon those whose worker will take a job
	// soon (grow's), linked those a worker holds; revoking counts the jobs
	// in flight with a revoke on its way.
	takers   placeHeap
	waiting  []*place
	donors   placeHeap
	free     int
	busy     int
	soon     int
	linked   int
	revoking int
	// used sums what the jobs in flight take, with a Capacity (recost).
	used Resources
	// usedNamed sums the same of the pool's named resources, in the
	// order of its config's names (recostNamed); nil without them.
	usedNamed []int64
	// republish lists the places whose held keys changed since collect
	// last ran (held.changed went from false to true).
	republish []*place

	fnTime map[*funcEntry]time.Duration // average run time, per function
	fatal  error
	cands  []*readyGroup
	round  uint64 // numbers the dispatch rounds

	// bound is how many places the scheduler may make for workers it
	// starts (Workers, InProcess), own how many it made, eager how many
	// of those it makes at once (the serial worker); it makes the others
	// as jobs wait for a worker (grow). starts are the places whose
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
	// firstDeadline is no later than the first deadline of the busy
	// places (deadline), and firstHello no later than the first handshake
	// due: the checks have nothing to do before them (zero: nothing at
	// all).
	firstDeadline, firstHello time.Time

	// Memory over time, from the workers' reports: since acctAt the
	// workers' caches held cacheSum bytes, staleBytes of them in items no
	// unfinished job needs; peakSum is the largest cacheSum, staleSeconds
	// the integral of staleBytes over time. curSum and staleNow are what
	// cacheSum and staleBytes are now, kept as the reports and the needed
	// items change; cached sums, per key, what the workers hold of it.
	acctAt       time.Time
	cacheSum     int64
	staleBytes   int64
	peakSum      int64
	staleSeconds float64
	curSum       int64
	staleNow     int64
	cached       map[uint64]cachedItem
	// noneSince: with RemoteOnly, since when the pool has had jobs left
	// and no live worker; zero if it has one.
	noneSince time.Time
}

func newScheduler(p *Pool, tr transport, msgs chan msg) *scheduler {
	s := &scheduler{p: p, tr: tr, msgs: msgs, perWorker: p.cfg.evict == EvictStale,
		byLink: map[link]*place{}, admitted: map[link]bool{}, fnTime: map[*funcEntry]time.Duration{}, cached: map[uint64]cachedItem{}}
	// pick's order: the fewest jobs in flight, then the lowest index.
	s.takers.order = func(a, b *place) bool {
		return len(a.inflight) < len(b.inflight) || len(a.inflight) == len(b.inflight) && a.index < b.index
	}
	s.takers.slot = func(pl *place) *int { return &pl.takerSlot }
	// busiest's: the most jobs to take back, then the lowest index.
	s.donors.order = func(a, b *place) bool {
		return a.revocable > b.revocable || a.revocable == b.revocable && a.index < b.index
	}
	s.donors.slot = func(pl *place) *int { return &pl.donorSlot }
	return s
}

// start makes the pool's window and starts the schedulers given before
// Run. The loop publishes the first required set and starts the workers:
// eager of them at once, and the others, up to n in all, as jobs wait for
// them (grow).
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
		s.shared = &window{pub: w}
	}
	p.setState(PoolRunning)
	for _, fn := range p.pendGo {
		p.startGo(fn)
	}
	p.pendGo = nil
	return nil
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
		s.checkWorkers(now)
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
		s.dispatch()
		s.grow()
		s.collect()
		if starts := s.starts; len(starts) > 0 {
			s.starts = nil
			p.mu.Unlock()
			s.deliver()
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
		s.deliver()

		select {
		case m := <-s.msgs:
			p.mu.Lock()
			now := time.Now()
			s.handle(m, now)
			// Take whatever else has arrived before dispatching again.
			for more := true; more; {
				select {
				case m := <-s.msgs:
					s.handle(m, now)
				default:
					more = false
				}
			}
			s.account(now)
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
