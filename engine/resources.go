package engine

import "fmt"

// Resources: what a job takes of the host while it runs (JobResources),
// and what the pool lets its running jobs take together (Capacity). The
// scheduler counts the resources of the jobs in flight at each place as
// the place changes (recost, from placeChanged), so that a dispatch round
// checks a job against the sums in constant time (fits), whatever the
// number of workers and jobs.

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
}

// JobResources declares what the job takes while it runs, counted against
// the pool's [Capacity]. A pool without a capacity ignores it. Negative
// fields panic.
func JobResources(r Resources) JobOption {
	if r.Slots < 0 || r.Memory < 0 {
		panic(fmt.Sprintf("engine: JobResources(%+v): negative", r))
	}
	return func(o *jobOptions) { o.cost = r }
}

// Capacity bounds what the pool's running jobs take together: the pool
// starts a job only when its [JobResources] fit in what the jobs in flight
// leave of c (a job declares 1 slot and no memory by default). A job that
// asks for more than c on its own runs alone, once nothing else runs.
//
// The order stays oldest first: while the oldest Queued job does not fit,
// no younger job starts, even one that would fit, so that a large job is
// never starved by a stream of small ones; the free workers wait. With
// a capacity, a worker is sent a job only when it has none in flight
// (nothing is sent ahead), so that the jobs counted are the jobs that
// run. Negative fields panic; the zero Resources sets no bound.
func Capacity(c Resources) Option {
	if c.Slots < 0 || c.Memory < 0 {
		panic(fmt.Sprintf("engine: Capacity(%+v): negative", c))
	}
	return func(cfg *config) { cfg.limit = c }
}

// limited reports whether the pool has a capacity to respect.
func (c *config) limited() bool { return c.limit.Slots > 0 || c.limit.Memory > 0 }

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
	return c.Memory <= 0 || s.used.Memory+j.cost.Memory <= c.Memory
}
