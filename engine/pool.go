package engine

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/shm"
)

// Defaults of a pool's shutdown.
const (
	// stopTimeout is how long Run waits for workers asked to stop (which
	// run the cleanups of their cached items) before it kills them.
	stopTimeout = 30 * time.Second
	// terminateGrace is how long a worker told to stop now (SIGTERM) has
	// before it is killed.
	terminateGrace = 2 * time.Second
	// startTimeout is how long a new worker has to answer the handshake.
	startTimeout = 30 * time.Second
)

// Dispatch: a worker is sent a job while it still has others only when all
// of those are of functions whose jobs take less than fastJob on average,
// and together about less than inFlightBudget, and never more than
// maxInFlight at once. Short jobs thus stream to a worker without waiting
// for a round trip each; long jobs go one at a time to whichever worker is
// free, so none waits behind another's long job.
const (
	fastJob        = 200 * time.Microsecond
	inFlightBudget = time.Millisecond
	maxInFlight    = 64
)

// An Option configures a pool.
type Option func(*config)

type config struct {
	workers  int
	failFast bool
	capacity int
	listener func(Event)
	tick     time.Duration
	evict    EvictPolicy
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
// workers then keep everything until the set fits again.
func WindowCapacity(n int) Option { return func(c *config) { c.capacity = n } }

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

// Tick makes the pool send an Event of kind Tick to its listeners whenever
// nothing else happened for d.
func Tick(d time.Duration) Option { return func(c *config) { c.tick = d } }

// A Pool runs jobs on worker processes, keeping in its window the keys of
// the cache items that its unfinished jobs need. Make one with [New], add
// jobs with [Queue] (or from schedulers, [Pool.Go]) and [Pool.Run] it once.
type Pool struct {
	cfg config

	mu       sync.Mutex
	state    PoolState
	jobs     []*job
	queue    readyQueue // Queued jobs, lowest id first (see readyQueue)
	refs     map[uint64]int32
	dirty    bool // the set of keys with refs > 0 changed since the last publish
	counts   [numStatuses]int
	open     int // jobs not finished
	pendGo   []func(context.Context) error
	running  int // schedulers running
	errs     []error
	failed   bool // fail-fast has fired
	slots    []*workerSlot
	win      *shm.Window
	runCtx   context.Context
	fnTime   map[*funcEntry]time.Duration // average run time, per function
	lastSeen time.Time

	wake chan struct{}

	evMu     sync.Mutex
	evCond   *sync.Cond
	events   []Event
	evClosed bool
}

// workerSlot is one worker place of the pool; a worker that dies is
// replaced in the same slot.
type workerSlot struct {
	index    int
	c        conn
	ready    bool
	inflight []*job
	jobs     int
	evicted  uint64
	restarts int
	lastPID  int
	stopping bool
	cur      cachepool.Stats // the live process's last report
	past     cachepool.Stats // summed over the slot's earlier processes
	frames   enc             // frames to send after this round
}

// New makes a pool.
func New(opts ...Option) *Pool {
	p := &Pool{
		cfg:    config{workers: runtime.NumCPU(), capacity: shm.DefaultCapacity},
		refs:   map[uint64]int32{},
		fnTime: map[*funcEntry]time.Duration{},
		wake:   make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(&p.cfg)
	}
	p.evCond = sync.NewCond(&p.evMu)
	return p
}

func (p *Pool) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Go adds a scheduler: a function that queues jobs while the pool runs, as
// BSB's schedule does. It runs in its own goroutine from the start of Run
// (at once, if Run has started) with Run's context, and Run does not return
// before it has. Its error is reported like a job's (see [JobError]). Go
// after Run has returned panics.
func (p *Pool) Go(scheduler func(ctx context.Context) error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.state {
	case PoolIdle:
		p.pendGo = append(p.pendGo, scheduler)
	case PoolClosed:
		panic("engine: Pool.Go after Run returned")
	default:
		p.startGo(scheduler)
	}
}

func (p *Pool) startGo(fn func(context.Context) error) {
	p.running++
	ctx := p.runCtx
	go func() {
		var err error
		func() {
			defer func() {
				if v := recover(); v != nil {
					err = fmt.Errorf("panic: %v", v)
				}
			}()
			err = fn(ctx)
		}()
		p.mu.Lock()
		p.running--
		if err != nil {
			p.errs = append(p.errs, &JobError{Func: "scheduler", Err: err})
			p.failure()
		}
		p.mu.Unlock()
		p.kick()
	}()
}

// add enters a new job; called by Queue.
func (p *Pool) add(j *job) {
	p.mu.Lock()
	defer p.kick()
	defer p.mu.Unlock()
	if p.state == PoolClosed {
		j.err = fmt.Errorf("job queued after the pool ended: %w", ErrPoolClosed)
		j.status.Store(int32(Cancelled))
		close(j.done)
		return
	}
	j.id = len(p.jobs) + 1
	j.added = time.Now()
	p.jobs = append(p.jobs, j)
	for _, k := range j.keys {
		p.refs[k]++
		if p.refs[k] == 1 {
			p.dirty = true
		}
	}
	p.open++
	p.counts[Pending]++
	p.emit(Event{Kind: JobAdded, JobID: j.id, Func: j.fn.name, Labels: j.labels, New: Pending})
	var bad *job
	for _, d := range j.deps {
		switch d.Status() {
		case Succeeded:
		case Failed, Cancelled, Aborted:
			bad = d
		default:
			j.waiting++
			d.dependents = append(d.dependents, j)
		}
	}
	switch {
	case bad != nil:
		p.finish(j, Cancelled, depError(bad))
	case p.failed:
		p.finish(j, Cancelled, fmt.Errorf("queued after a failure: %w", ErrFailFast))
	case j.waiting == 0:
		p.setStatus(j, Queued)
		p.queue.push(j)
	}
}

func depError(d *job) error {
	return fmt.Errorf("%w: job %d (%s) %s", ErrDependencyFailed, d.id, d.fn.name, d.Status())
}

// setStatus moves j to status s and reports it. p.mu is held.
func (p *Pool) setStatus(j *job, s Status) {
	old := j.Status()
	p.counts[old]--
	p.counts[s]++
	j.status.Store(int32(s))
	ev := Event{Kind: JobStatus, JobID: j.id, Func: j.fn.name, Labels: j.labels, Old: old, New: s, Worker: j.worker}
	if s.Done() {
		ev.Err = j.err
	}
	p.emit(ev)
}

// finish ends j with status s and error err, releases its items, and
// releases or cancels its dependents (and theirs). p.mu is held.
func (p *Pool) finish(j *job, s Status, err error) {
	type end struct {
		j   *job
		s   Status
		err error
	}
	todo := []end{{j, s, err}}
	for len(todo) > 0 {
		e := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		j := e.j
		if j.Status().Done() {
			continue
		}
		j.err = e.err
		if j.ended.IsZero() {
			j.ended = time.Now()
		}
		p.setStatus(j, e.s)
		p.open--
		for _, k := range j.keys {
			if p.refs[k]--; p.refs[k] == 0 {
				delete(p.refs, k)
				p.dirty = true
			}
		}
		for _, d := range j.dependents {
			if d.Status() != Pending {
				continue
			}
			if e.s == Succeeded {
				if d.waiting--; d.waiting == 0 {
					p.setStatus(d, Queued)
					p.queue.push(d)
				}
				continue
			}
			todo = append(todo, end{d, Cancelled, depError(j)})
		}
		j.dependents = nil
		close(j.done)
		if e.s == Failed || e.s == Aborted {
			p.errs = append(p.errs, &JobError{JobID: j.id, Func: j.fn.name, Labels: j.labels, Err: e.err})
			p.failure()
		}
	}
}

// failure notes a failure; with fail-fast it cancels every job that has not
// started. p.mu is held.
func (p *Pool) failure() {
	if !p.cfg.failFast || p.failed {
		return
	}
	p.failed = true
	for _, j := range p.jobs {
		if st := j.Status(); st == Pending || st == Queued {
			p.finish(j, Cancelled, fmt.Errorf("another job failed: %w", ErrFailFast))
		}
	}
}

// emit records an event for the listeners. p.mu is held.
func (p *Pool) emit(e Event) {
	if p.cfg.listener == nil {
		return
	}
	e.Time = time.Now()
	e.Pool = p.state
	e.Counts = p.counts
	for _, s := range p.slots {
		e.CacheBytes += s.cur.Bytes
	}
	p.lastSeen = e.Time
	p.evMu.Lock()
	p.events = append(p.events, e)
	p.evMu.Unlock()
	p.evCond.Signal()
}

func (p *Pool) setState(s PoolState) {
	p.state = s
	p.emit(Event{Kind: PoolStatus})
}

// deliver calls the listener with every event, in order, until closed.
func (p *Pool) deliver(done chan<- struct{}) {
	defer close(done)
	var batch []Event
	for {
		p.evMu.Lock()
		for len(p.events) == 0 && !p.evClosed {
			p.evCond.Wait()
		}
		if len(p.events) == 0 && p.evClosed {
			p.evMu.Unlock()
			return
		}
		batch, p.events = p.events, batch[:0]
		p.evMu.Unlock()
		for _, e := range batch {
			p.cfg.listener(e)
		}
		clear(batch)
	}
}
