package engine

import "slices"

// The end of a dispatch round: under the pool's lock the scheduler chooses
// the windows whose sets changed and the sets to publish (collect); after
// it, its goroutine publishes them, then sends the round's tasks stamped
// with the new generations (deliver), so that a publish that crosses a
// network holds up nothing that takes the lock.

// A window is one the scheduler publishes, with what it knows of it: the
// figures of its last publish (for Stats, which never asks a window
// itself), and whether it overflowed.
type window struct {
	pub       windowPublisher
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
