package engine

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// The scheduler: it publishes the required set, sends Queued jobs to the
// workers that can take them, and handles what the workers say, until the
// pool ends. It knows workers only through the transport seam
// (transport.go) and the window only as a publisher (window.go).

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

// scheduler is the state of one Run. Its goroutine alone runs its methods,
// with p.mu held where they say so; places are also read by Pool.Stats.
type scheduler struct {
	p    *Pool
	tr   transport
	win  publisher
	msgs chan msg

	places    []*place
	byLink    map[link]*place
	lastIndex int

	fnTime  map[*funcEntry]time.Duration // average run time, per function
	fatal   error
	publish []uint64
}

func newScheduler(p *Pool, tr transport, win publisher, msgs chan msg) *scheduler {
	return &scheduler{p: p, tr: tr, win: win, msgs: msgs, byLink: map[link]*place{}, fnTime: map[*funcEntry]time.Duration{}}
}

// start publishes the first required set, starts n workers and the
// schedulers given before Run.
func (s *scheduler) start(n int) error {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sched = s
	s.publishLocked()
	for range n {
		if err := s.startWorker(s.addPlace()); err != nil {
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

// publishLocked publishes the set of required keys if it changed. p.mu is held.
func (s *scheduler) publishLocked() {
	p := s.p
	if !p.dirty {
		return
	}
	s.publish = s.publish[:0]
	for k := range p.refs {
		s.publish = append(s.publish, k)
	}
	s.win.publish(s.publish)
	p.dirty = false
}

// loop dispatches jobs and handles the workers' messages until every job has
// finished and every scheduler has returned, ctx ends, or the pool cannot
// go on (no worker can be started).
func (s *scheduler) loop(ctx context.Context, stopSchedulers context.CancelFunc) error {
	p := s.p
	var tick *time.Timer
	var tickC <-chan time.Time
	if p.cfg.tick > 0 && p.cfg.listener != nil {
		tick = time.NewTimer(p.cfg.tick)
		defer tick.Stop()
		tickC = tick.C
	}
	for {
		p.mu.Lock()
		s.checkHandshakes(time.Now())
		if s.fatal != nil {
			p.mu.Unlock()
			return s.fatal
		}
		if p.failed {
			stopSchedulers()
		}
		if p.open == 0 && p.activeGo == 0 {
			p.mu.Unlock()
			return nil
		}
		s.publishLocked()
		s.dispatchLocked()
		if tick != nil {
			tick.Reset(time.Until(p.lastEvent.Add(p.cfg.tick)))
		}
		p.mu.Unlock()

		select {
		case m := <-s.msgs:
			p.mu.Lock()
			s.handleLocked(m)
			// Take whatever else has arrived before dispatching again.
			for more := true; more; {
				select {
				case m := <-s.msgs:
					s.handleLocked(m)
				default:
					more = false
				}
			}
			p.mu.Unlock()
		case <-p.wake:
		case <-tickC:
			p.mu.Lock()
			if !time.Now().Before(p.lastEvent.Add(p.cfg.tick)) {
				p.emit(Event{Kind: TickEvent})
			}
			p.mu.Unlock()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// dispatchLocked sends Queued jobs to workers that can take them. p.mu is held.
func (s *scheduler) dispatchLocked() {
	p := s.p
	if p.failed {
		return
	}
	gen := s.win.gen()
	for j := p.queue.peek(); j != nil; j = p.queue.peek() {
		if j.Status() != Queued {
			p.queue.pop()
			continue
		}
		pl := s.pickLocked()
		if pl == nil {
			break
		}
		p.queue.pop()
		if j.argErr != nil {
			p.finish(j, Failed, j.argErr)
			continue
		}
		j.worker = pl.index
		pl.inflight = append(pl.inflight, j)
		p.setStatus(j, Running)
		pl.tasks = append(pl.tasks, task{id: uint64(j.id), gen: gen, fn: j.fn.name, arg: j.arg})
	}
	for _, pl := range s.places {
		if len(pl.tasks) > 0 {
			pl.l.send(pl.tasks)
			clear(pl.tasks)
			pl.tasks = pl.tasks[:0]
		}
	}
}

// pickLocked returns the place whose worker should take the next job, or
// nil: the one with the fewest jobs in flight among those that may take one
// more.
func (s *scheduler) pickLocked() *place {
	var best *place
	for _, pl := range s.places {
		if !s.canTakeLocked(pl) {
			continue
		}
		if best == nil || len(pl.inflight) < len(best.inflight) {
			best = pl
		}
	}
	return best
}

func (s *scheduler) canTakeLocked(pl *place) bool {
	if pl.l == nil || !pl.ready || pl.stopping {
		return false
	}
	if len(pl.inflight) == 0 {
		return true
	}
	if len(pl.inflight) >= maxInFlight {
		return false
	}
	var queued time.Duration
	for _, j := range pl.inflight {
		t, ok := s.fnTime[j.fn]
		if !ok || t >= fastJob {
			return false
		}
		queued += t
	}
	return queued < inFlightBudget
}

// handleLocked takes one message from a worker. p.mu is held.
func (s *scheduler) handleLocked(m msg) {
	pl := s.byLink[m.from]
	if pl == nil {
		if m.hello == nil {
			return // from a worker that has already been dealt with
		}
		if s.p.state != PoolRunning {
			m.from.terminate(0) // too late to join
			return
		}
		// A worker that joined by itself takes a new place.
		pl = s.addPlace()
		pl.joined = true
		s.attach(pl, m.from)
	}
	switch {
	case m.hello != nil:
		s.hello(pl, m.hello)
	case m.replies != nil:
		for _, rep := range m.replies {
			s.doneLocked(pl, rep)
		}
	case m.bye != nil:
		pl.cur = *m.bye
	case m.died != nil:
		s.diedLocked(pl, m.died)
	}
}

func (s *scheduler) doneLocked(pl *place, rep *reply) {
	p := s.p
	if rep.id == 0 || rep.id > uint64(len(p.jobs)) {
		return
	}
	j := p.jobs[rep.id-1]
	if i := slices.Index(pl.inflight, j); i >= 0 {
		pl.inflight = slices.Delete(pl.inflight, i, i+1)
	}
	pl.jobs++
	pl.evicted += uint64(rep.evicted)
	pl.cur = rep.stats
	if t, ok := s.fnTime[j.fn]; ok {
		s.fnTime[j.fn] = t - t/8 + rep.elapsed/8
	} else {
		s.fnTime[j.fn] = rep.elapsed
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
		p.finish(j, Failed, &PanicError{Op: "job", Value: string(rep.payload), Stack: rep.stack})
	default:
		p.finish(j, Failed, &RemoteError{Msg: string(rep.payload)})
	}
}

// diedLocked handles the end of a worker: the job it was running is
// Aborted, the jobs waiting behind it go back to the queue, and, while the
// pool runs, a new worker takes the place of one the transport started.
// p.mu is held.
func (s *scheduler) diedLocked(pl *place, why error) {
	p := s.p
	wasReady, stopping, timedOut := pl.ready, pl.stopping, pl.timedOut
	s.left(pl)
	switch {
	case timedOut:
		p.errs = append(p.errs, fmt.Errorf("engine: %v did not answer the handshake within %v and was killed", pl, p.cfg.startTimeout))
		pl.removed = true
		if s.live() == 0 && s.fatal == nil && !stopping {
			s.fatal = fmt.Errorf("engine: no worker left: %v did not answer the handshake within %v (does main call engine.Init() first?)", pl, p.cfg.startTimeout)
		}
	case !wasReady && !stopping && s.fatal == nil:
		s.fatal = fmt.Errorf("engine: %v %v before the handshake: does main call engine.Init() first?", pl, why)
	}
	for i, j := range pl.inflight {
		if j.Status() != Running {
			continue
		}
		if i == 0 {
			err := fmt.Errorf("%w: %v %v", ErrWorkerDied, pl, why)
			if stopping {
				err = fmt.Errorf("%w: %v %v", errStopped, pl, why)
			}
			p.finish(j, Aborted, err)
			continue
		}
		// It never started: back to the queue, where its id puts it
		// before the jobs queued after it.
		p.setStatus(j, Queued)
		p.queue.push(j)
	}
	pl.inflight = pl.inflight[:0]
	if pl.joined {
		pl.removed = true
	}
	if pl.removed || stopping || s.fatal != nil || p.state != PoolRunning {
		return
	}
	pl.restarts++
	if err := s.startWorker(pl); err != nil {
		s.fatal = err
	}
}

// shutdown ends the run: after a normal end the workers are asked to stop
// (they clear their caches and say goodbye); after a failure or the end of
// ctx (err != nil), the jobs not started are cancelled and the workers are
// terminated. It returns when every worker has gone.
func (s *scheduler) shutdown(err error) {
	p := s.p
	p.mu.Lock()
	p.setState(PoolStopping)
	if err != nil {
		for _, pl := range s.places {
			for i, j := range pl.inflight {
				if j.Status() != Running {
					continue
				}
				if i == 0 {
					p.finish(j, Aborted, fmt.Errorf("%w: worker %d was stopped: %w", errStopped, pl.index, err))
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
	for _, pl := range s.places {
		if pl.l == nil {
			continue
		}
		live++
		pl.stopping = true
		switch {
		case !pl.ready:
			pl.l.terminate(0) // it never served: no cache to clear
		case err != nil:
			pl.l.terminate(terminateGrace)
		default:
			pl.l.stop()
		}
	}
	p.mu.Unlock()

	deadline := time.NewTimer(stopTimeout)
	defer deadline.Stop()
	for live > 0 {
		select {
		case m := <-s.msgs:
			p.mu.Lock()
			if pl := s.byLink[m.from]; m.died != nil && pl != nil {
				live--
			}
			s.handleLocked(m)
			p.mu.Unlock()
		case <-deadline.C:
			p.mu.Lock()
			for _, pl := range s.places {
				if pl.l != nil {
					pl.l.terminate(terminateGrace)
				}
			}
			p.mu.Unlock()
		}
	}
}
