package engine

import (
	"fmt"
	"time"

	"github.com/poolrun/poolrun/cachepool"
)

// A place is where one worker serves the pool. A worker that dies is
// replaced in its place, so a place's figures cover every process that held
// it; a place whose worker joined by itself, or did not answer its
// handshake, is removed when the worker goes. Places are guarded by p.mu.
type place struct {
	index int
	l     link // nil while no worker holds the place
	pid   int  // of the worker that holds the place, or held it last

	ready    bool // the worker said hello
	joined   bool // the worker came by itself: not replaced when it goes
	stopping bool // asked to stop: its end is expected
	helloBy  time.Time
	timer    *time.Timer // wakes the scheduler at helloBy
	timedOut bool        // killed for not answering the handshake
	removed  bool        // the place is gone; only its figures remain

	inflight []*job // sent to the worker, in order; the first runs
	tasks    []task // to send at the end of this dispatch round

	jobs     int
	evicted  uint64
	restarts int
	cur      cachepool.Stats // the live process's last report
	past     cachepool.Stats // of the place's earlier processes
}

func (pl *place) stats() WorkerStats {
	return WorkerStats{Index: pl.index, PID: pl.pid, Jobs: pl.jobs, Restarts: pl.restarts,
		Evicted: pl.evicted, Cache: addStats(pl.past, pl.cur)}
}

// startWorker has the transport start a worker for pl, whose handshake is
// due within the pool's start timeout. p.mu is held.
func (s *scheduler) startWorker(pl *place) error {
	l, err := s.tr.start(pl.index)
	if err != nil {
		return err
	}
	s.attach(pl, l)
	pl.helloBy = time.Now().Add(s.p.cfg.startTimeout)
	pl.timer = time.AfterFunc(s.p.cfg.startTimeout, s.p.kick)
	return nil
}

// attach puts the worker of l in pl. p.mu is held.
func (s *scheduler) attach(pl *place, l link) {
	pl.l, pl.ready, pl.stopping, pl.timedOut = l, false, false, false
	if pid := l.pid(); pid != 0 {
		pl.pid = pid
	}
	s.byLink[l] = pl
}

// addPlace makes a new place. p.mu is held.
func (s *scheduler) addPlace() *place {
	s.lastIndex++
	pl := &place{index: s.lastIndex}
	s.places = append(s.places, pl)
	return pl
}

// live counts the places that hold or will hold a worker. p.mu is held.
func (s *scheduler) live() int {
	n := 0
	for _, pl := range s.places {
		if !pl.removed {
			n++
		}
	}
	return n
}

// checkHandshakes kills the workers whose handshake is overdue. p.mu is
// held.
func (s *scheduler) checkHandshakes(now time.Time) {
	for _, pl := range s.places {
		if pl.l != nil && !pl.ready && !pl.stopping && !pl.timedOut && now.After(pl.helloBy) {
			pl.timedOut = true
			pl.l.terminate(0)
		}
	}
}

// hello marks pl's worker ready. p.mu is held.
func (s *scheduler) hello(pl *place, h *hello) {
	pl.ready, pl.pid = true, h.pid
	if pl.timer != nil {
		pl.timer.Stop()
		pl.timer = nil
	}
}

// left forgets the worker of pl, which has gone, and keeps its figures.
// p.mu is held.
func (s *scheduler) left(pl *place) {
	delete(s.byLink, pl.l)
	pl.l, pl.ready = nil, false
	pl.past = addStats(pl.past, pl.cur)
	pl.cur = cachepool.Stats{}
	if pl.timer != nil {
		pl.timer.Stop()
		pl.timer = nil
	}
}

// cacheBytes sums what the workers' caches held at their last reports.
// p.mu is held.
func (s *scheduler) cacheBytes() int64 {
	var n int64
	for _, pl := range s.places {
		n += pl.cur.Bytes
	}
	return n
}

func (pl *place) String() string { return fmt.Sprintf("worker %d (pid %d)", pl.index, pl.pid) }
