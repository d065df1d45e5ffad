package engine

import (
	"fmt"
	"maps"
	"slices"
)

// Resources: what a job takes of the host while it runs (JobResources),
// and what the pool lets its running jobs take together (Capacity). The
// scheduler counts the resources of the jobs in flight at each place as
// the place changes (recost, from placeChanged), so that a dispatch round
// checks a job against the sums in constant time (fits), whatever the
// number of workers and jobs.
//
// Named resources are counted by index, not by name: Capacity sorts the
// names it bounds, and Queue turns a job's map into a slice of amounts in
// that order (nil when the job takes none of them), so that counting
// looks up no map and a pool without named resources pays nothing.

// Resources are what a job takes while it runs ([JobResources]), or what a
// pool's running jobs may take together ([Capacity]).
type Resources struct {
	// Slots: for a job, the slots it takes, as the threads of a command
	// that runs several (0 means 1); for a pool, the most slots its
	// running jobs take together (0: no limit but the workers).
	Slots int
	// Memory: for a job, the bytes it takes (0: none to count); for a
	// pool, the most bytes its running jobs take together (0: no limit).
	Memory int64
	// Named holds amounts of resources that only their names describe (a
	// GPU, a licence): for a job, how much of each it takes; for a pool,
	// the most of each its running jobs take together. A name the pool's
	// Capacity does not list has no limit: what jobs take of it is not
	// counted. A limit of 0 is a limit: a job that takes some runs alone.
	// nil: none.
	Named map[string]int64
}

// JobResources declares what the job takes while it runs, counted against
// the pool's [Capacity]. A pool without a capacity ignores it. Negative
// amounts panic. r.Named is copied.
func JobResources(r Resources) JobOption {
	r = r.checked("JobResources")
	return func(o *jobOptions) { o.cost = r }
}

// Capacity bounds what the pool's running jobs take together: the pool
// starts a job only when its [JobResources] fit in what the jobs in flight
// leave of c (a job declares 1 slot, no memory and nothing named by
// default). A job that asks for more than c on its own runs alone, once
// nothing else runs.
//
// The order stays oldest first: while the oldest Queued job does not fit,
// no younger job starts, even one that would fit, so that a large job is
// never starved by a stream of small ones; the free workers wait. With
// a capacity, a worker is sent a job only when it has none in flight
// (nothing is sent ahead), so that the jobs counted are the jobs that
// run. Negative amounts panic; the zero Resources sets no bound. c.Named
// is copied.
func Capacity(c Resources) Option {
	c = c.checked("Capacity")
	names := slices.Sorted(maps.Keys(c.Named))
	limits := make([]int64, len(names))
	for i, n := range names {
		limits[i] = c.Named[n]
	}
	return func(cfg *config) { cfg.limit, cfg.names, cfg.named = c, names, limits }
}

// checked returns r with a copy of its Named, and panics, naming the
// function of the package (what), if an amount is negative.
func (r Resources) checked(what string) Resources {
	bad := r.Slots < 0 || r.Memory < 0
	for _, v := range r.Named {
		bad = bad || v < 0
	}
	if bad {
		panic(fmt.Sprintf("engine: %s(%+v): negative", what, r))
	}
	r.Named = maps.Clone(r.Named)
	return r
}

// limited reports whether the pool has a capacity to respect.
func (c *config) limited() bool {
	return c.limit.Slots > 0 || c.limit.Memory > 0 || len(c.named) > 0
}

// namedCost returns the amounts of the pool's named resources that a job
// takes, given its Named: in the order of c.names, nil when it takes
// none of them.
func (c *config) namedCost(named map[string]int64) []int64 {
	var cost []int64
	for i, n := range c.names {
		if v := named[n]; v > 0 {
			if cost == nil {
				cost = make([]int64, len(c.names))
			}
			cost[i] = v
		}
	}
	return cost
}

// slots returns the slots j takes: at least one.
func (j *job) slots() int { return max(j.cost.Slots, 1) }

// recost brings the resources counted for pl's jobs in flight, and the
// scheduler's sums, up to date (placeChanged).
func (s *scheduler) recost(pl *place) {
	var now Resources
	for _, j := range pl.inflight {
		now.Slots += j.slots()
		now.Memory += j.cost.Memory
	}
	s.used.Slots += now.Slots - pl.cost.Slots
	s.used.Memory += now.Memory - pl.cost.Memory
	pl.cost = now
	if len(s.p.cfg.named) > 0 {
		s.recostNamed(pl)
	}
}

// recostNamed is recost's part for the named resources.
func (s *scheduler) recostNamed(pl *place) {
	if s.usedNamed == nil {
		s.usedNamed = make([]int64, len(s.p.cfg.named))
	}
	if pl.named == nil {
		pl.named = make([]int64, len(s.p.cfg.named))
	}
	for i, v := range pl.named {
		s.usedNamed[i] -= v
		pl.named[i] = 0
	}
	for _, j := range pl.inflight {
		for i, v := range j.named {
			pl.named[i] += v
		}
	}
	for i, v := range pl.named {
		s.usedNamed[i] += v
	}
}

// fits reports whether j may start now within the pool's capacity: what
// it takes fits in what the jobs in flight leave, or nothing is in flight
// (a job larger than the capacity runs alone).
func (s *scheduler) fits(j *job) bool {
	c := s.p.cfg.limit
	if s.used.Slots == 0 {
		return true
	}
	if c.Slots > 0 && s.used.Slots+j.slots() > c.Slots {
		return false
	}
	if c.Memory > 0 && s.used.Memory+j.cost.Memory > c.Memory {
		return false
	}
	for i, v := range j.named {
		if v > 0 && s.usedNamed[i]+v > s.p.cfg.named[i] {
			return false
		}
	}
	return true
}
