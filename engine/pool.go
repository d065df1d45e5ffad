package engine

import (
	"context"
	"errors"
	"runtime/debug"
	"slices"
	"sync"
	"time"
)

// A Pool runs jobs on worker processes, keeping in its window the keys of
// the cache items that its unfinished jobs need. Make one with [New], add
// jobs with [Queue] (or from schedulers, [Pool.Go]) and [Pool.Run] it once.
//
// Misuse of a pool is a programming error and panics with a message that
// begins "engine: ": a second Run, Run from a job in a worker process, Go
// after Run has returned, a nil pool or function given to Queue, a
// dependency from another pool, an option out of range.
// What goes wrong while a pool runs is an error.
type Pool struct {
	cfg config

	// mu guards the job graph, the pool's state, and the scheduler's worker
	// places (which Stats reads).
	mu     sync.Mutex
	state  PoolState
	jobs   []*job
	queue  readyQueue // Queued jobs, lowest id first (see readyQueue)
	refs   refCounts  // over the jobs not finished
	unsent refCounts  // over the jobs not sent to a worker (Pending, Queued)
	counts [numStatuses]int
	open   int // jobs not finished
	errs   []error
	failed bool // fail-fast has fired

	// learned holds the keys of the items each function's jobs got
	// without declaring them (LearnItems); said, the (function, family)
	// pairs whose members they got so.
	learned map[*funcEntry][]uint64
	said    map[learnedPair]bool

	// Schedulers (Pool.Go): those given before Run, the context they get,
	// and those that have not returned (counted under mu for the scheduler,
	// and in a WaitGroup for the end of Run).
	pendGo     []func(context.Context) error
	schedCtx   context.Context
	activeGo   int
	schedulers sync.WaitGroup

	// sched is the running pool's scheduler (nil before Run); lastEvent
	// is when the last event was made, for ticks.
	sched     *scheduler
	lastEvent time.Time

	// wake tells the scheduler that something changed: a job was queued or
	// cancelled, a scheduler returned, a worker's handshake is overdue.
	wake chan struct{}

	ev events
}

// New makes a pool.
//
// In a worker process whose main did not call [Init] first, New does not
// return: the process exits, and its pool's Run fails with [ErrNoInit].
func New(opts ...Option) *Pool {
	checkInit()
	p := &Pool{
		cfg:  defaultConfig(),
		wake: make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(&p.cfg)
	}
	p.ev.cond = sync.NewCond(&p.ev.mu)
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
// before it has. Its error, or its panic as a [*PanicError], is reported
// like a job's (see [JobError]). Go after Run has returned panics.
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

// startGo starts a scheduler. p.mu is held.
func (p *Pool) startGo(fn func(context.Context) error) {
	p.activeGo++
	p.schedulers.Add(1)
	ctx := p.schedCtx
	go func() {
		defer p.schedulers.Done()
		var err error
		func() {
			defer func() {
				if v := recover(); v != nil {
					err = &PanicError{Op: "scheduler", Value: v, Stack: debug.Stack()}
				}
			}()
			err = fn(ctx)
		}()
		p.mu.Lock()
		p.activeGo--
		if err != nil {
			p.errs = append(p.errs, &JobError{Func: "scheduler", Err: err})
			p.failure()
		}
		p.mu.Unlock()
		p.kick()
	}()
}

// Run starts workers as the jobs need them (see [Workers]), runs every job
// (and those that schedulers and listeners queue meanwhile) to the end,
// stops the workers and returns.
// A pool runs once: a second call panics, and so does a call from a job
// in a worker process.
//
// Run returns nil when every job succeeded or was cancelled with
// [Job.Cancel]. Otherwise it returns [errors.Join] of:
//   - a [*JobError] per job that failed or was aborted, and per scheduler
//     that returned an error;
//   - an error per worker that did not answer its handshake in time (30 s);
//   - an error wrapping [ErrNoInit] if main does not call [Init] first;
//   - an error wrapping [ErrCrashLoop] if workers kept dying before they
//     ran a job;
//   - the context's error if it ended.
//
// Jobs cancelled because a dependency did not succeed are not listed: the
// dependency is.
//
// When ctx ends, jobs that have not started are cancelled, the workers
// running jobs are sent SIGTERM (cancelling those jobs' contexts) and killed
// two seconds later if still there, and their jobs are Aborted. Run returns
// once every worker process has exited and every scheduler has returned.
//
// At the end of a pool every worker runs the cleanups of the items it still
// holds before it exits.
func (p *Pool) Run(ctx context.Context) error {
	if isWorker() {
		checkInit()
		panic("engine: Pool.Run in a worker process: a job cannot run a pool of its own")
	}
	p.mu.Lock()
	if p.state != PoolIdle {
		p.mu.Unlock()
		panic("engine: Pool.Run called more than once")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	schedCtx, stopSchedulers := context.WithCancel(ctx)
	defer stopSchedulers()
	p.schedCtx = schedCtx
	p.setState(PoolStarting)
	p.mu.Unlock()

	evDone := make(chan struct{})
	if p.cfg.listener != nil {
		go p.deliver(evDone)
	} else {
		close(evDone)
	}

	err := p.runScheduler(ctx, stopSchedulers)

	p.mu.Lock()
	p.setState(PoolClosed)
	errs := slices.Clone(p.errs)
	p.mu.Unlock()
	if err != nil {
		errs = append([]error{err}, errs...)
	}
	p.closeEvents()
	<-evDone
	return errors.Join(errs...)
}

// runScheduler makes the transport and runs the scheduler on it until the
// pool ends.
func (p *Pool) runScheduler(ctx context.Context, stopSchedulers context.CancelFunc) error {
	msgs := make(chan msg, 64)
	var tr transport
	// Up to n workers, eager of them at once and the others as jobs wait
	// for them (see Workers).
	n, eager := p.cfg.workers, 0
	params := p.cfg.workerParams()
	switch {
	case p.cfg.transport != nil:
		tr, n = p.cfg.transport(p.cfg.capacity, params, msgs)
		eager = n
	case p.cfg.remoteOnly > 0:
		tr, n = newProcessTransport(p.cfg.capacity, params, msgs, p.cfg.output), 0
	case n == 0:
		// Serial mode: its one worker, a goroutine, is there from the
		// start, jobs or not.
		tr, n, eager = newLocalTransport(p.cfg.capacity, params, msgs, p.cfg.output), 1, 1
	case p.cfg.inProcess:
		tr = newLocalTransport(p.cfg.capacity, params, msgs, p.cfg.output)
	default:
		tr = newProcessTransport(p.cfg.capacity, params, msgs, p.cfg.output)
	}
	s := newScheduler(p, tr, msgs)
	err := s.start(n, eager)
	if err == nil {
		joinCtx, stopJoiners := context.WithCancel(ctx)
		var joiners sync.WaitGroup
		for _, f := range p.cfg.joiners {
			joiners.Go(func() { f(joinCtx, hostPool{p}) })
		}
		err = s.loop(ctx, stopSchedulers)
		stopJoiners()
		joiners.Wait()
	}
	s.shutdown(err)
	// Schedulers were told to stop with Run's context; wait for them.
	p.schedulers.Wait()
	tr.close()
	s.closeWindows()
	return err
}
