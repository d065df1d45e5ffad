package engine

import (
	"slices"
	"time"
)

// Which ready job a free worker takes, for the scheduler (dispatch.go):
// cache affinity within a bound on how long the oldest job waits.

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
// time; never when either is unknown).
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

// score rates group g for the worker of pl.
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
// order when a build would take it past its budget.
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
