package engine

import (
	"fmt"
	"runtime"
	"time"

	"github.com/poolrun/poolrun/shm"
)

// Defaults of a pool's start and shutdown.
const (
	// defaultStartTimeout is how long a new worker has to answer the
	// handshake, unless [StartTimeout] says otherwise.
	defaultStartTimeout = 30 * time.Second
	// stopTimeout is how long Run waits for workers asked to stop (which
	// run the cleanups of their cached items) before it kills them.
	stopTimeout = 30 * time.Second
	// terminateGrace is how long a worker told to stop now (SIGTERM) has
	// before it is killed.
	terminateGrace = 2 * time.Second
)

// An Option configures a pool. Options whose argument is out of range
// panic, as every misuse of the package does (see [Pool]).
type Option func(*config)

type config struct {
	workers      int
	failFast     bool
	capacity     int
	listener     func(Event)
	tick         time.Duration
	evict        EvictPolicy
	startTimeout time.Duration
	// transport, when set, makes the pool's transport instead of the pipe
	// transport, and says how many workers to start (others may join).
	transport func(win *shm.Window, policy EvictPolicy, out chan<- msg) (tr transport, start int)
}

func defaultConfig() config {
	return config{
		workers:      runtime.NumCPU(),
		capacity:     shm.DefaultCapacity,
		startTimeout: defaultStartTimeout,
	}
}

// Workers sets the number of worker processes (default [runtime.NumCPU]).
// Zero runs the jobs serially in this process, with the same statuses,
// events, window and cache eviction as with workers. Negative n panics.
func Workers(n int) Option {
	if n < 0 {
		panic(fmt.Sprintf("engine: Workers(%d): negative", n))
	}
	return func(c *config) { c.workers = n }
}

// FailFast makes the first failure (a job that fails or is aborted, or a
// scheduler's error) end the pool: no job starts after it, every job that
// has not started is cancelled (its error wraps [ErrFailFast]), running jobs
// finish, and Run returns.
func FailFast() Option { return func(c *config) { c.failFast = true } }

// WindowCapacity sets the number of slots of the pool's window (default
// [shm.DefaultCapacity]). More distinct required items than slots is safe:
// workers then keep everything until the set fits again. n < 1 panics; a
// capacity the system cannot map makes Run fail.
func WindowCapacity(n int) Option {
	if n < 1 {
		panic(fmt.Sprintf("engine: WindowCapacity(%d): fewer than one slot", n))
	}
	return func(c *config) { c.capacity = n }
}

// OnEvent adds a progress listener. Listeners are called from one goroutine,
// in the order of the events, never concurrently; a slow listener delays
// later events, not the pool. Run returns after the last event (the pool's
// PoolClosed) was delivered.
func OnEvent(fn func(Event)) Option {
	return func(c *config) {
		if prev := c.listener; prev != nil {
			c.listener = func(e Event) { prev(e); fn(e) }
		} else {
			c.listener = fn
		}
	}
}

// Tick makes the pool send an Event of kind [TickEvent] to its listeners
// whenever nothing else happened for d. Zero sends none; negative d panics.
func Tick(d time.Duration) Option {
	if d < 0 {
		panic(fmt.Sprintf("engine: Tick(%v): negative", d))
	}
	return func(c *config) { c.tick = d }
}

// Evict sets the pool's eviction policy (default [EvictStale]). Workers
// learn it in the handshake, so it applies in worker processes and in
// serial mode alike. An unknown policy panics.
func Evict(policy EvictPolicy) Option {
	if policy >= numPolicies {
		panic(fmt.Sprintf("engine: Evict(%d): unknown policy", uint8(policy)))
	}
	return func(c *config) { c.evict = policy }
}

// StartTimeout sets how long a new worker has to answer the handshake
// (default 30 s). A worker that has not answered by then (its program's
// main is busy before it calls [Init], say) is killed, the failure is
// reported in Run's error, and the pool goes on with its other workers;
// that worker's place is not filled again. d <= 0 panics.
func StartTimeout(d time.Duration) Option {
	if d <= 0 {
		panic(fmt.Sprintf("engine: StartTimeout(%v): not positive", d))
	}
	return func(c *config) { c.startTimeout = d }
}
