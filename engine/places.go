package engine

import (
	"slices"
	"time"

	"github.com/poolrun/poolrun/cachepool"
)

// A place is where one worker serves the pool. A worker that dies is
// replaced in its place, so a place's figures cover every process that held
// it; a place whose worker joined by itself, or did not answer its
// handshake, is removed when the worker goes. Places are guarded by p.mu.
type place struct {
	index int
	l     link      // nil while no worker holds the place
	pid   int       // of the worker that holds the place, or held it last
	host  string    // of a worker that joined from elsewhere, as it said
	win   *window   // the window its workers read
	held  refCounts // the keys of the jobs in flight on its worker

	ready    bool // the worker said hello
	refill   bool // its worker died: the next one started in it is a restart
	joined   bool // the worker came by itself: not replaced when it goes
	stopping bool // asked to stop: its end is expected
	saidBye  bool // the worker said goodbye: it ends normally
	helloBy  time.Time
	timer    *time.Timer // wakes the scheduler at helloBy
	timedOut bool        // killed for not answering the handshake
	heard    time.Time   // when its worker last said something, or was sent its first job since
	kill     *killing    // why the scheduler killed its worker, if it did
	removed  bool        // the place is gone; only its figures remain

	// What the scheduler's sets and counts hold of the place, as of the
	// last placeChanged. takerSlot and donorSlot are its slots in s.takers
	// and s.donors (-1: not there); in says whether it counts as free,
	// busy, soon and linked. blocked says that pick found its worker could
	// take no more jobs: it stays out of s.takers until it changes, or
	// until a function's average time crosses a bound of the dispatch
	// rules (see done). revocable counts its jobs in flight that rebalance
	// may take back (see revocable).
	takerSlot, donorSlot int
	blocked              bool
	in                   struct{ free, busy, soon, linked bool }
	revocable            int

	waitRound  uint64   // the dispatch round in which affinity made it wait
	order      []uint64 // evictionOrder for orderRound
	orderRound uint64
	inflight   []*job           // sent to the worker, in order; the first runs (pushInflight)
	inflightAt []*job           // the array that inflight is a window of, from its start
	sent       uint64           // the jobs sent to its worker process
	resident   map[uint64]int64 // the items its worker holds, with their sizes, as last reported
	tasks      []task           // to send at the end of this dispatch round (deliver)
	funcs      []funcCount      // the jobs in flight, by function (load)
	cost       Resources        // what its jobs in flight take, as last counted (recost)
	named      []int64          // the same of the pool's named resources (recostNamed)

	jobs          int
	served        int // jobs its current worker finished
	evicted       uint64
	budgetEvicted uint64
	restarts      int
	peakRSS       int64
	cur           cachepool.Stats // the live process's last report
	past          cachepool.Stats // of the place's earlier processes
}

// A funcCount is a function and a number of its jobs.
type funcCount struct {
	fn *funcEntry
	n  int
}

// countFunc adds d to the jobs of fn in flight at pl.
func (pl *place) countFunc(fn *funcEntry, d int) {
	for i := range pl.funcs {
		if pl.funcs[i].fn != fn {
			continue
		}
		if pl.funcs[i].n += d; pl.funcs[i].n == 0 {
			pl.funcs = slices.Delete(pl.funcs, i, i+1)
		}
		return
	}
	pl.funcs = append(pl.funcs, funcCount{fn, d})
}

// pushInflight appends j to the jobs in flight at pl. The first of them
// leaves by a reslice (dropInflight), so that a reply costs the same however
// many jobs wait behind it: pl.inflight then moves along its array, and
// when it reaches the end, the jobs in flight go back to the array's
// start, or to one twice their number if it has not that room.
func (pl *place) pushInflight(j *job) {
	if s := pl.inflight; len(s) == cap(s) {
		a := pl.inflightAt
		if len(a) <= 2*len(s) {
			a = make([]*job, max(4*len(s), 8))
		}
		n := copy(a, s)
		clear(a[n:]) // the array keeps no job that has left
		pl.inflight, pl.inflightAt = a[:n], a
	}
	pl.inflight = append(pl.inflight, j)
}

// dropInflight takes the i-th of the jobs in flight at pl off them.
func (pl *place) dropInflight(i int) {
	if i > 0 {
		pl.inflight = slices.Delete(pl.inflight, i, i+1)
		return
	}
	pl.inflight[0] = nil
	pl.inflight = pl.inflight[1:]
}

// killing is why the scheduler killed a place's worker: the job it ran
// (if the kill was for it) ends with status st and error err once the
// worker has gone; silent says that the worker sent nothing for too long.
type killing struct {
	j      *job
	st     Status
	err    error
	silent bool
}

// holds reports whether the worker of pl holds item k, or will once its
// jobs in flight have run.
func (pl *place) holds(k uint64) bool {
	if pl.held.has(k) {
		return true
	}
	_, ok := pl.resident[k]
	return ok
}

func (pl *place) stats() WorkerStats {
	return WorkerStats{Index: pl.index, PID: pl.pid, Host: pl.host, Live: pl.l != nil && pl.ready && !pl.removed, Jobs: pl.jobs, Restarts: pl.restarts,
		Evicted: pl.evicted, BudgetEvicted: pl.budgetEvicted, PeakRSS: pl.peakRSS,
		Cache: addStats(pl.past, pl.cur)}
}

// grow chooses the places in which the loop starts workers (see
// startWorkers): the first eager at once, then one more for each job that
// waits for a worker (Queued, after this round's dispatch) beyond the
// workers that will take one soon (starting, or free), up to the bound of
// the places the scheduler makes. So a pool starts no more workers than
// it has jobs to run at once, and starts more as its graph widens.
func (s *scheduler) grow() {
	p := s.p
	if p.state != PoolRunning || s.fatal != nil || s.crashLoop != nil || p.failed || s.own >= s.bound {
		return
	}
	want := s.eager - s.own
	if waiting := p.counts[Queued]; waiting > 0 {
		want = max(want, waiting-s.soon)
	}
	for range min(want, s.bound-s.own) {
		pl, err := s.addPlace(nil)
		if err != nil {
			s.fatal = err
			return
		}
		s.own++
		s.starts = append(s.starts, pl)
	}
}

// soon reports whether the worker of pl will take a job soon: it is to
// start, is starting, or is free.
func (pl *place) soon() bool {
	if pl.removed {
		return false
	}
	if pl.l == nil {
		return true // its worker is to start (startWorkers)
	}
	return !pl.stopping && pl.kill == nil && (!pl.ready || len(pl.inflight) == 0)
}

// startWorkers has the transport start a worker in each of pls, whose
// handshake is due within the pool's start timeout. The starts (for a
// worker process, a fork and exec on the spawning thread) run without
// p.mu, so that Stats, Queue and Cancel do not wait for them; the places
// get their links under p.mu afterwards. Only the scheduler's goroutine
// calls it and handles the workers' messages, so none of these workers'
// messages is handled before the worker is in its place.
func (s *scheduler) startWorkers(pls []*place) {
	links := make([]link, len(pls))
	errs := make([]error, len(pls))
	for i, pl := range pls {
		links[i], errs[i] = s.tr.start(pl.index, pl.win.pub)
	}
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, pl := range pls {
		if errs[i] != nil {
			if s.fatal == nil {
				s.fatal = errs[i]
			}
			continue
		}
		if pl.refill {
			pl.restarts++
			pl.refill = false
		}
		s.attach(pl, links[i])
		pl.helloBy = time.Now().Add(p.cfg.startTimeout)
		s.firstHello = sooner(s.firstHello, pl.helloBy)
		pl.timer = time.AfterFunc(p.cfg.startTimeout, p.kick)
	}
}

// attach puts the worker of l in pl.
func (s *scheduler) attach(pl *place, l link) {
	pl.l, pl.ready, pl.stopping, pl.timedOut, pl.saidBye, pl.served, pl.kill = l, false, false, false, false, 0, nil
	pl.sent = 0
	if pid := l.pid(); pid != 0 {
		pl.pid = pid
	}
	s.byLink[l] = pl
	s.placeChanged(pl)
}

// addPlace makes a new place, reading window win: with EvictStale a window
// of its own (nil: make one), else the pool's.
func (s *scheduler) addPlace(win windowPublisher) (*place, error) {
	w := s.shared
	if win != nil {
		w = &window{pub: win}
	} else if s.perWorker {
		pub, err := s.tr.newWindow()
		if err != nil {
			return nil, err
		}
		w = &window{pub: pub}
	}
	s.lastIndex++
	pl := &place{index: s.lastIndex, win: w, takerSlot: -1, donorSlot: -1}
	s.places = append(s.places, pl)
	if w != s.shared {
		pl.held.changed = true // publish the set for it
		s.republish = append(s.republish, pl)
	}
	s.placeChanged(pl)
	return pl, nil
}

// closeWindows closes the pool's windows, which keep their figures. Only
// the scheduler's goroutine calls it, without p.mu, once the loop is over.
func (s *scheduler) closeWindows() {
	if s.shared != nil {
		s.shared.pub.Close()
	}
	for _, pl := range s.places {
		if pl.win != s.shared {
			pl.win.pub.Close()
		}
	}
}

// windowFigures returns the publishes of the pool's windows, summed, and
// the highest generation, as of their last publishes.
func (s *scheduler) windowFigures() (publishes, gen uint64) {
	if s.shared != nil {
		publishes, gen = s.shared.pubs, s.shared.gen
	}
	for _, pl := range s.places {
		if pl.win != s.shared {
			publishes += pl.win.pubs
			gen = max(gen, pl.win.gen)
		}
	}
	return publishes, gen
}

// live counts the places that hold or will hold a worker.
func (s *scheduler) live() int {
	n := 0
	for _, pl := range s.places {
		if !pl.removed {
			n++
		}
	}
	return n
}

// checkHandshakes kills the workers whose handshake is overdue: none
// before firstHello, the first handshake due when it last looked.
func (s *scheduler) checkHandshakes(now time.Time) {
	if s.firstHello.IsZero() || !now.After(s.firstHello) {
		return
	}
	s.firstHello = time.Time{}
	for _, pl := range s.places {
		if pl.l == nil || pl.ready || pl.stopping || pl.timedOut {
			continue
		}
		if now.After(pl.helloBy) {
			pl.timedOut = true
			pl.l.terminate(0)
		} else {
			s.firstHello = sooner(s.firstHello, pl.helloBy)
		}
	}
}

// hello marks pl's worker ready.
func (s *scheduler) hello(pl *place, h *hello) {
	pl.ready, pl.pid, pl.host = true, h.pid, h.host
	if pl.timer != nil {
		pl.timer.Stop()
		pl.timer = nil
	}
	s.placeChanged(pl)
}

// left forgets the worker of pl, which has gone, and keeps its figures.
func (s *scheduler) left(pl *place) {
	for _, j := range pl.inflight {
		s.dropHeld(pl, j.keys)
	}
	delete(s.byLink, pl.l)
	pl.l, pl.ready = nil, false
	// A process that has gone holds nothing, whatever it last reported.
	gone := pl.cur
	gone.Bytes, gone.Resident = 0, 0
	pl.past = addStats(pl.past, gone)
	s.setCur(pl, cachepool.Stats{})
	s.setResident(pl, nil)
	if pl.timer != nil {
		pl.timer.Stop()
		pl.timer = nil
	}
}

// addHeld counts keys as held by the jobs in flight at pl, and dropHeld
// drops them; a place whose held keys change is listed for collect.
func (s *scheduler) addHeld(pl *place, keys []uint64) {
	was := pl.held.changed
	pl.held.add(keys)
	if !was && pl.held.changed {
		s.republish = append(s.republish, pl)
	}
}

func (s *scheduler) dropHeld(pl *place, keys []uint64) {
	was := pl.held.changed
	pl.held.drop(keys)
	if !was && pl.held.changed {
		s.republish = append(s.republish, pl)
	}
}
