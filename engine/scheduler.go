package engine

import (
	"context"
	"slices"
	"time"

	"github.com/poolrun/poolrun/cachepool"
)

// The scheduler: it publishes the required set, sends Queued jobs to the
// workers that can take them, and handles what the workers say, until the
// pool ends. It knows workers only through the transport seam
// (transport.go) and the window only as a publisher (window.go).

// crashLoopLimit is how many workers in a row may die without having run
// a job (before the handshake, or after it while they had no job; see
// died) before the pool starts no more workers: a program that never
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
// worker found unable to take one more job is looked at again once
// something changes at it (a job sent to it or ended, a cancel, its
// worker's state), or once a function's average time is first known or
// falls below fastJob or aheadJob; not as the averages merely drift, which
// would make every busy worker worth a look after every reply (so a
// worker at the budget takes one more job after its next reply). A
// worker that has nothing to do while jobs that need no cache item wait
// behind others' takes one of them back: the parent revokes the last such
// job waiting at the busiest worker, which hands it back unless it has
// started it (rebalance), so that such a job does not wait behind a
// job that turned out long.
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
	places    []*place
	byLink    map[link]*place
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

// account brings the memory figures up to now, after the workers' reports
// or the set of needed items changed.
func (s *scheduler) account(now time.Time) {
	if !s.acctAt.IsZero() {
		s.staleSeconds += float64(s.staleBytes) * now.Sub(s.acctAt).Seconds()
	}
	s.acctAt = now
	s.cacheSum, s.staleBytes = s.curSum, s.staleNow
	s.peakSum = max(s.peakSum, s.cacheSum)
}

// A cachedItem is what the workers hold of an item, as last reported: the
// bytes, summed, and the places that hold it.
type cachedItem struct {
	bytes  int64
	places int
}

// setCur records the cache statistics of pl's worker's last report.
func (s *scheduler) setCur(pl *place, st cachepool.Stats) {
	s.curSum += st.Bytes - pl.cur.Bytes
	pl.cur = st
}

// setResident records the resident set pl's worker reported (nil: it holds
// nothing).
func (s *scheduler) setResident(pl *place, rs []residentItem) {
	for k, b := range pl.resident {
		s.uncache(k, b)
	}
	clear(pl.resident)
	if rs == nil {
		pl.resident = nil
		return
	}
	if pl.resident == nil {
		pl.resident = make(map[uint64]int64, len(rs))
	}
	for _, r := range rs {
		if b, ok := pl.resident[r.key]; ok {
			s.uncache(r.key, b)
		}
		pl.resident[r.key] = r.bytes
		s.cache(r.key, r.bytes)
	}
}

// cache counts b bytes of item k held by a worker, and uncache takes them
// off.
func (s *scheduler) cache(k uint64, b int64) {
	c := s.cached[k]
	c.bytes += b
	c.places++
	s.cached[k] = c
	if !s.p.refs.has(k) {
		s.staleNow += b
	}
}

func (s *scheduler) uncache(k uint64, b int64) {
	c := s.cached[k]
	c.bytes -= b
	if c.places--; c.places == 0 {
		delete(s.cached, k)
	} else {
		s.cached[k] = c
	}
	if !s.p.refs.has(k) {
		s.staleNow -= b
	}
}

// needed notes that item k became needed by some unfinished job (yes), or
// needed by none (!yes): the bytes the workers hold of it stop, or start,
// being stale.
func (s *scheduler) needed(k uint64, yes bool) {
	b := s.cached[k].bytes
	if yes {
		b = -b
	}
	s.staleNow += b
}

func newScheduler(p *Pool, tr transport, msgs chan msg) *scheduler {
	s := &scheduler{p: p, tr: tr, msgs: msgs, perWorker: p.cfg.evict == EvictStale,
		byLink: map[link]*place{}, fnTime: map[*funcEntry]time.Duration{}, cached: map[uint64]cachedItem{}}
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

// A window is one the scheduler publishes, with what it knows of it: the
// figures of its last publish (for Stats, which never asks a window
// itself), and whether it overflowed.
type window struct {
	pub       WindowPublisher
	gen, pubs uint64
	over      bool
	keys      []uint64 // the set to publish this round (publication)
}

// A publication is a set to publish in a window, chosen under p.mu and
// published after it is released (deliver). place is the window's place
// with EvictStale and for a worker that joined with a window of its own;
// 0 for the pool's shared window.
type publication struct {
	w     *window
	keys  []uint64
	place int
}

// collect chooses the windows whose sets changed and the sets to publish
// in them: every window when the set they all list changed, else those of
// the places whose held keys changed (republish), in the places' order.
func (s *scheduler) collect() {
	p := s.p
	pls := s.places
	if s.perWorker && !p.unsent.changed || !s.perWorker && !p.refs.changed {
		pls = s.republish
		slices.SortFunc(pls, func(a, b *place) int { return a.index - b.index })
	}
	if !s.perWorker {
		// The pool-wide set, listed once: in the shared window, and in
		// the windows of their own that workers which joined by themselves
		// (on other hosts) read.
		listed := false
		keys := func() []uint64 {
			if !listed {
				s.shared.keys, listed = appendKeys(s.shared.keys[:0], p.refs.n), true
			}
			return s.shared.keys
		}
		if p.refs.changed {
			s.pubs = append(s.pubs, publication{w: s.shared, keys: keys()})
		}
		for _, pl := range pls {
			if pl.removed || pl.win == s.shared || !(p.refs.changed || pl.held.changed) {
				continue
			}
			s.pubs = append(s.pubs, publication{w: pl.win, keys: keys(), place: pl.index})
			pl.held.changed = false
		}
		p.refs.changed = false
		s.republished()
		return
	}
	all := p.unsent.changed
	for _, pl := range pls {
		if pl.removed || !(all || pl.held.changed) {
			continue
		}
		w := pl.win
		w.keys = appendKeys(w.keys[:0], p.unsent.n)
		for k := range pl.held.n {
			if !p.unsent.has(k) {
				w.keys = append(w.keys, k)
			}
		}
		s.pubs = append(s.pubs, publication{w: w, keys: w.keys, place: pl.index})
		pl.held.changed = false
	}
	p.unsent.changed = false
	s.republished()
}

// republished empties republish once collect has looked at its places.
func (s *scheduler) republished() {
	clear(s.republish)
	s.republish = s.republish[:0]
}

// deliver publishes the sets collect chose, then sends the round's jobs,
// stamped with their windows' generations: a worker that sees any
// generation from then on keeps what its jobs need. It runs without p.mu,
// so that a window that takes its time to publish (across a network)
// holds up neither Queue, Stats nor Cancel; only the scheduler's goroutine
// touches the windows, the round's tasks and the places' links.
func (s *scheduler) deliver() {
	over := s.overs[:0]
	for _, pb := range s.pubs {
		over = append(over, pb.w.pub.Publish(pb.keys))
	}
	s.overs = over
	for _, pl := range s.sending {
		gen := pl.win.pub.Gen()
		for i := range pl.tasks {
			pl.tasks[i].gen = gen
		}
		pl.l.send(pl.tasks)
		clear(pl.tasks)
		pl.tasks = pl.tasks[:0]
	}
	clear(s.sending)
	s.sending = s.sending[:0]
	if len(s.pubs) == 0 {
		return
	}
	p := s.p
	p.mu.Lock()
	for i, pb := range s.pubs {
		pb.w.gen, pb.w.pubs = pb.w.pub.Gen(), pb.w.pub.Publishes()
		s.overflow(pb.w, over[i], pb.place, len(pb.keys))
	}
	p.mu.Unlock()
	clear(s.pubs)
	s.pubs = s.pubs[:0]
}

// overflow reports a window's going over its capacity, or fitting again.
func (s *scheduler) overflow(w *window, over bool, worker, items int) {
	if over == w.over {
		return
	}
	w.over = over
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
