package engine

import (
	"container/heap"
	"fmt"
)

// The scheduler's sets and counts of places, kept as each place changes
// (placeChanged) rather than found by a scan of every place per round or
// per reply: the places that may take a job and those with jobs to take
// back, as heaps; the free, busy, soon and linked places, as counts.

// placeChanged brings the scheduler's sets and counts of places (see
// scheduler) up to date with pl, after a change to its worker (l, ready,
// stopping, kill, removed), its jobs in flight (a job sent, ended, or
// cancelled) or its waitRound. Every such change is followed by a call,
// before the scheduler looks at those sets again. It takes pl out of the
// blocked ones: pick looks at it again. The first deadline of a busy
// place brings firstDeadline forward if it comes sooner.
func (s *scheduler) placeChanged(pl *place) {
	n := len(pl.inflight)
	serving := pl.l != nil && pl.ready && !pl.stopping
	recount(&pl.in.free, serving && n == 0 && pl.kill == nil, &s.free)
	recount(&pl.in.busy, serving && n > 0 && pl.kill == nil, &s.busy)
	recount(&pl.in.soon, pl.soon(), &s.soon)
	recount(&pl.in.linked, pl.l != nil && !pl.removed, &s.linked)
	pl.blocked = false
	if s.p.cfg.limited() {
		s.recost(pl)
	}
	s.takers.set(pl, serving && n < maxInFlight && pl.waitRound != s.round)
	s.donors.set(pl, pl.l != nil && !pl.stopping && pl.kill == nil && pl.revocable > 0)
	if pl.in.busy {
		s.firstDeadline = sooner(s.firstDeadline, s.deadline(pl))
	}
}

// recount sets *in, whether a place counts in *n, to v, and *n with it.
func recount(in *bool, v bool, n *int) {
	switch {
	case v && !*in:
		*n++
	case !v && *in:
		*n--
	}
	*in = v
}

// block takes pl, at the top of s.takers, out of them: its worker may not
// take one more job (pick).
func (s *scheduler) block(pl *place) {
	s.takers.set(pl, false)
	pl.blocked = true
}

// unblock puts the blocked places back among the takers, for pick to look
// at again: after a function's average time changed so that more workers
// may take jobs (see done). It looks at every place; it runs rarely.
func (s *scheduler) unblock() {
	for _, pl := range s.places {
		if pl.blocked {
			s.placeChanged(pl)
		}
	}
}

// A placeHeap is a heap of places, the first by its order at the top
// (container/heap), which records each place's position in it in a slot
// of the place (-1: not in it).
type placeHeap struct {
	pls   []*place
	order func(a, b *place) bool
	slot  func(pl *place) *int
}

// set puts pl in h, or fixes its position if it is there, when in; else
// it takes pl out of h, if it is there.
func (h *placeHeap) set(pl *place, in bool) {
	switch i := *h.slot(pl); {
	case in && i < 0:
		heap.Push(h, pl)
	case in:
		heap.Fix(h, i)
	case i >= 0:
		heap.Remove(h, i)
	}
}

// top returns the first place of h, or nil.
func (h *placeHeap) top() *place {
	if len(h.pls) == 0 {
		return nil
	}
	return h.pls[0]
}

func (h *placeHeap) Len() int           { return len(h.pls) }
func (h *placeHeap) Less(i, j int) bool { return h.order(h.pls[i], h.pls[j]) }

func (h *placeHeap) Swap(i, j int) {
	h.pls[i], h.pls[j] = h.pls[j], h.pls[i]
	*h.slot(h.pls[i]), *h.slot(h.pls[j]) = i, j
}

func (h *placeHeap) Push(x any) {
	pl := x.(*place)
	*h.slot(pl) = len(h.pls)
	h.pls = append(h.pls, pl)
}

func (h *placeHeap) Pop() any {
	n := len(h.pls) - 1
	pl := h.pls[n]
	h.pls[n] = nil
	h.pls = h.pls[:n]
	*h.slot(pl) = -1
	return pl
}

func (pl *place) String() string { return fmt.Sprintf("worker %d (pid %d)", pl.index, pl.pid) }
