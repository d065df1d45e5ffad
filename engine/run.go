package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/shm"
)

// errStopped is wrapped by the error of jobs whose worker was stopped
// because Run's context ended.
var errStopped = errors.New("stopped")

// Run starts the workers, runs every job (and those that schedulers and
// listeners queue meanwhile) to the end, stops the workers and returns.
// A pool runs once: a second call returns an error.
//
// Run returns nil when every job succeeded or was cancelled with
// [Job.Cancel]. Otherwise it returns [errors.Join] of a [*JobError] per job
// that failed or was aborted and per scheduler that returned an error, and
// of the context's error if it ended. Jobs cancelled because a dependency
// did not succeed are not listed: the dependency is.
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
		return fmt.Errorf("engine: Pool.Run in a worker process: main must call engine.Init() before anything else (%s is set)", WorkerEnv)
	}
	p.mu.Lock()
	if p.state != PoolIdle {
		p.mu.Unlock()
		return errors.New("engine: Pool.Run called more than once")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	schedCtx, stopSchedulers := context.WithCancel(ctx)
	defer stopSchedulers()
	p.runCtx = schedCtx
	p.setState(PoolStarting)
	p.mu.Unlock()

	evDone := make(chan struct{})
	if p.cfg.listener != nil {
		go p.deliver(evDone)
	} else {
		close(evDone)
	}

	r := &run{p: p, msgs: make(chan msg, 64)}
	err := r.start()
	if err == nil {
		err = r.loop(ctx, stopSchedulers)
	}
	r.shutdown(err)

	p.mu.Lock()
	p.setState(PoolClosed)
	errs := slices.Clone(p.errs)
	p.mu.Unlock()
	if err != nil {
		errs = append([]error{err}, errs...)
	}
	p.evMu.Lock()
	p.evClosed = true
	p.evMu.Unlock()
	p.evCond.Signal()
	<-evDone
	return errors.Join(errs...)
}

// run is the state of one Run that only its goroutine touches.
type run struct {
	p       *Pool
	msgs    chan msg
	sp      *spawner
	cache   *cachepool.Cache // serial mode's in-process worker cache; nil with worker processes
	fatal   error
	publish []uint64
}

func (r *run) start() error {
	p := r.p
	win, err := shm.Create(p.cfg.capacity)
	if err != nil {
		return fmt.Errorf("engine: creating the window: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.win = win
	n := p.cfg.workers
	if n == 0 {
		r.cache = cachepool.New()
		n = 1
	} else {
		r.sp = newSpawner()
	}
	r.publishLocked()
	for i := range n {
		s := &workerSlot{index: i + 1}
		p.slots = append(p.slots, s)
		if err := r.startWorker(s); err != nil {
			return err
		}
	}
	p.setState(PoolRunning)
	for _, fn := range p.pendGo {
		p.startGo(fn)
	}
	p.pendGo = nil
	return nil
}

func (r *run) startWorker(s *workerSlot) error {
	var c *pipeConn
	var err error
	if r.cache != nil {
		c, err = startLocal(s, r.p.win, r.cache, r.p.cfg.evict, r.msgs)
	} else {
		c, err = startProcess(r.sp, s, r.p.win, r.p.cfg.evict, r.msgs)
	}
	if err != nil {
		return err
	}
	s.c, s.ready, s.stopping = c, false, false
	return nil
}

// publishLocked publishes the set of required keys if it changed. p.mu is held.
func (r *run) publishLocked() {
	p := r.p
	if !p.dirty {
		return
	}
	r.publish = r.publish[:0]
	for k := range p.refs {
		r.publish = append(r.publish, k)
	}
	// An overflow is not an error: the window says "keep everything".
	p.win.Publish(r.publish)
	p.dirty = false
}

// loop dispatches jobs and handles the workers' messages until every job has
// finished and every scheduler has returned, ctx ends, or a worker cannot be
// started.
func (r *run) loop(ctx context.Context, stopSchedulers context.CancelFunc) error {
	p := r.p
	var tick *time.Timer
	var tickC <-chan time.Time
	if p.cfg.tick > 0 && p.cfg.listener != nil {
		tick = time.NewTimer(p.cfg.tick)
		defer tick.Stop()
		tickC = tick.C
	}
	for {
		p.mu.Lock()
		if r.fatal != nil {
			p.mu.Unlock()
			return r.fatal
		}
		if p.failed {
			stopSchedulers()
		}
		if p.open == 0 && p.running == 0 {
			p.mu.Unlock()
			return nil
		}
		r.publishLocked()
		r.dispatchLocked()
		if tick != nil {
			tick.Reset(time.Until(p.lastSeen.Add(p.cfg.tick)))
		}
		p.mu.Unlock()

		select {
		case m := <-r.msgs:
			p.mu.Lock()
			r.handleLocked(m)
			// Take whatever else has arrived before dispatching again.
			for more := true; more; {
				select {
				case m := <-r.msgs:
					r.handleLocked(m)
				default:
					more = false
				}
			}
			p.mu.Unlock()
		case <-p.wake:
		case <-tickC:
			p.mu.Lock()
			if !time.Now().Before(p.lastSeen.Add(p.cfg.tick)) {
				p.emit(Event{Kind: TickEvent})
			}
			p.mu.Unlock()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// dispatchLocked sends Queued jobs to workers that can take them. p.mu is held.
func (r *run) dispatchLocked() {
	p := r.p
	if p.failed {
		return
	}
	gen := p.win.Gen()
	for j := p.queue.peek(); j != nil; j = p.queue.peek() {
		if j.Status() != Queued {
			p.queue.pop()
			continue
		}
		s := r.pickLocked()
		if s == nil {
			break
		}
		p.queue.pop()
		if j.argErr != nil {
			p.finish(j, Failed, j.argErr)
			continue
		}
		j.worker = s.index
		s.inflight = append(s.inflight, j)
		p.setStatus(j, Running)
		s.frames.job(&task{id: uint64(j.id), gen: gen, fn: j.fn.name, arg: j.arg})
	}

	for _, s := range p.slots {
		if len(s.frames.b) > 0 {
			s.c.send(s.frames.b)
			s.frames.b = s.frames.b[:0]
		}
	}
}

// pickLocked returns the worker that should take the next job, or nil: the
// one with the fewest jobs in flight among those that may take one more.
func (r *run) pickLocked() *workerSlot {
	var best *workerSlot
	for _, s := range r.p.slots {
		if !r.canTakeLocked(s) {
			continue
		}
		if best == nil || len(s.inflight) < len(best.inflight) {
			best = s
		}
	}
	return best
}

func (r *run) canTakeLocked(s *workerSlot) bool {
	if s.c == nil || !s.ready || s.stopping {
		return false
	}
	if len(s.inflight) == 0 {
		return true
	}
	if len(s.inflight) >= maxInFlight {
		return false
	}
	var queued time.Duration
	for _, j := range s.inflight {
		t, ok := r.p.fnTime[j.fn]
		if !ok || t >= fastJob {
			return false
		}
		queued += t
	}
	return queued < inFlightBudget
}

// handleLocked takes one message from a worker. p.mu is held.
func (r *run) handleLocked(m msg) {
	s := m.slot
	if s.c != m.c {
		return // from a worker this slot has already replaced
	}
	switch {
	case m.hello:
		s.ready = true
	case m.replies != nil:
		for _, rep := range m.replies {
			r.doneLocked(s, rep)
		}
	case m.bye != nil:
		s.cur = *m.bye
	case m.died != nil:
		r.diedLocked(s, m.died)
	}
}

func (r *run) doneLocked(s *workerSlot, rep *reply) {
	p := r.p
	if rep.id == 0 || rep.id > uint64(len(p.jobs)) {
		return
	}
	j := p.jobs[rep.id-1]
	if i := slices.Index(s.inflight, j); i >= 0 {
		s.inflight = slices.Delete(s.inflight, i, i+1)
	}
	s.jobs++
	s.evicted += uint64(rep.evicted)
	s.cur = rep.stats
	if t, ok := p.fnTime[j.fn]; ok {
		p.fnTime[j.fn] = t - t/8 + rep.elapsed/8
	} else {
		p.fnTime[j.fn] = rep.elapsed
	}
	if j.Status() != Running {
		return // ended meanwhile (the pool was stopped)
	}
	j.started = rep.start
	j.ended = rep.start.Add(rep.elapsed)
	switch rep.outcome {
	case outcomeOK:
		j.result = rep.payload
		p.finish(j, Succeeded, nil)
	case outcomePanic:
		p.finish(j, Failed, &PanicError{Value: string(rep.payload), Stack: rep.stack})
	default:
		p.finish(j, Failed, &RemoteError{Msg: string(rep.payload)})
	}
}

// diedLocked handles the end of a worker: the job it was running is
// Aborted, the jobs waiting behind it go back to the queue, and, while the
// pool runs, a new worker takes the slot.
func (r *run) diedLocked(s *workerSlot, why error) {
	p := r.p
	pid := s.c.pid()
	s.lastPID = pid
	wasReady, stopping := s.ready, s.stopping
	s.c, s.ready = nil, false
	s.past = addStats(s.past, s.cur)
	s.cur = cachepool.Stats{}
	if !wasReady && !stopping && r.fatal == nil {
		r.fatal = fmt.Errorf("engine: worker %d (pid %d) %v before the handshake: does main call engine.Init() first?", s.index, pid, why)
	}
	for i, j := range s.inflight {
		if j.Status() != Running {
			continue
		}
		if i == 0 {
			err := fmt.Errorf("%w: worker %d (pid %d) %v", ErrWorkerDied, s.index, pid, why)
			if stopping {
				err = fmt.Errorf("%w: worker %d (pid %d) %v", errStopped, s.index, pid, why)
			}
			p.finish(j, Aborted, err)
			continue
		}
		// It never started: back to the queue, where its id puts it
		// before the jobs queued after it.
		p.setStatus(j, Queued)
		p.queue.push(j)
	}
	s.inflight = s.inflight[:0]
	if stopping || r.fatal != nil || p.state != PoolRunning {
		return
	}
	s.restarts++
	if err := r.startWorker(s); err != nil {
		r.fatal = err
	}
}

func addStats(a, b cachepool.Stats) cachepool.Stats {
	a.Hits += b.Hits
	a.Builds += b.Builds
	a.Evictions += b.Evictions
	a.Resident += b.Resident
	a.Bytes += b.Bytes
	a.PeakBytes = max(a.PeakBytes, b.PeakBytes)
	a.BuildTime += b.BuildTime
	return a
}

// shutdown ends the run: after a normal end the workers are asked to stop
// (they clear their caches and say goodbye); after a failure or the end of
// ctx (err != nil), the jobs not started are cancelled and the workers are
// terminated. It returns when every worker has gone and every scheduler has
// returned.
func (r *run) shutdown(err error) {
	p := r.p
	p.mu.Lock()
	p.setState(PoolStopping)
	if err != nil {
		for _, s := range p.slots {
			for i, j := range s.inflight {
				if j.Status() != Running {
					continue
				}
				if i == 0 {
					p.finish(j, Aborted, fmt.Errorf("%w: worker %d was stopped: %w", errStopped, s.index, err))
				} else {
					p.finish(j, Cancelled, fmt.Errorf("pool stopped: %w", err))
				}
			}
		}
		for _, j := range p.jobs {
			if st := j.Status(); st == Pending || st == Queued {
				p.finish(j, Cancelled, fmt.Errorf("pool stopped: %w", err))
			}
		}
	}
	live := 0
	var e enc
	for _, s := range p.slots {
		if s.c == nil {
			continue
		}
		live++
		s.stopping = true
		if err != nil {
			s.c.terminate(terminateGrace)
		} else {
			e.b = e.b[:0]
			e.stop()
			s.c.send(e.b)
		}
	}
	p.mu.Unlock()

	deadline := time.NewTimer(stopTimeout)
	defer deadline.Stop()
	for live > 0 {
		select {
		case m := <-r.msgs:
			p.mu.Lock()
			if m.died != nil && m.slot.c == m.c {
				live--
			}
			r.handleLocked(m)
			p.mu.Unlock()
		case <-deadline.C:
			p.mu.Lock()
			for _, s := range p.slots {
				if s.c != nil {
					s.c.terminate(terminateGrace)
				}
			}
			p.mu.Unlock()
		}
	}
	// Schedulers were told to stop with Run's context; wait for them.
	for {
		p.mu.Lock()
		n := p.running
		p.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-p.wake:
		case <-time.After(10 * time.Millisecond):
		}
	}
	if r.sp != nil {
		r.sp.close()
	}
	if r.cache != nil {
		r.cache.Clear()
	}
	p.mu.Lock()
	if p.win != nil {
		p.win.Close()
	}
	p.mu.Unlock()
}

// Stats are a pool's figures, from [Pool.Stats].
type Stats struct {
	// Workers has one entry per worker slot.
	Workers []WorkerStats
	// Publishes counts the window publishes that changed the required set;
	// Generation is the window's generation at the last one.
	Publishes  uint64
	Generation uint64
	// Counts holds the number of jobs in each status, indexed by Status.
	Counts [numStatuses]int
}

// WorkerStats are the figures of one worker slot.
type WorkerStats struct {
	// Index numbers the slot from 1. PID is its current (or last) process.
	Index, PID int
	// Jobs counts the jobs its processes ran; Restarts the processes that
	// replaced one that died.
	Jobs, Restarts int
	// Evicted counts the items its processes evicted while the pool ran,
	// by the pool's eviction policy: stale items before a job (EvictStale),
	// or everything after each job (EvictEachJob). Cache.Evictions counts
	// these and the clear at the end of the pool.
	Evicted uint64
	// Cache sums the cache statistics of the slot's processes (PeakBytes is
	// the largest), as last reported: after every job and at the end.
	Cache cachepool.Stats
}

// Total returns the sum of the workers' figures: jobs, restarts, items
// evicted, and every cache counter. Cache.PeakBytes is the sum of the
// workers' own peaks (what they would hold if their peaks coincided);
// Cache.Bytes and Cache.Resident are what they hold now. Index and PID are 0.
func (s Stats) Total() WorkerStats {
	var t WorkerStats
	for _, w := range s.Workers {
		t.Jobs += w.Jobs
		t.Restarts += w.Restarts
		t.Evicted += w.Evicted
		c := &t.Cache
		c.Hits += w.Cache.Hits
		c.Builds += w.Cache.Builds
		c.Evictions += w.Cache.Evictions
		c.Resident += w.Cache.Resident
		c.Bytes += w.Cache.Bytes
		c.PeakBytes += w.Cache.PeakBytes
		c.BuildTime += w.Cache.BuildTime
	}
	return t
}

// Stats returns the pool's figures; it may be called at any time.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Stats{Counts: p.counts}
	if p.win != nil {
		st.Publishes = p.win.Publishes()
		st.Generation = p.win.Gen()
	}
	for _, s := range p.slots {
		ws := WorkerStats{Index: s.index, Jobs: s.jobs, Restarts: s.restarts, Evicted: s.evicted, Cache: addStats(s.past, s.cur)}
		ws.PID = s.lastPID
		if s.c != nil {
			ws.PID = s.c.pid()
		}
		st.Workers = append(st.Workers, ws)
	}
	return st
}
