package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/poolrun/poolrun/engine"
)

// Agent joins the pool of joinFile as one host agent: one connection to
// the pool's server, and n worker processes of this program behind it
// (engine.StartWorkerProcess: the very processes a local pool starts),
// each of which joins as a worker of its own. The agent relays each
// worker's frames between its pipes and its subjects, and writes each
// worker's window, in shared memory, from the pool's sets, at the pool's
// generations: the workers read it with atomic loads, as on the pool's
// host.
//
// A worker that dies while the pool runs is replaced (its running job is
// Aborted, or run again with retries, as any worker's); after five workers
// in a row died within agentShortLife of their start, the agent gives up
// and returns an error (a worker that lived longer starts the count
// again). Agent returns once the pool has stopped
// all of its workers, or has ended; when its connection ends, or ctx ends,
// it terminates its workers (SIGTERM: their running jobs are cancelled and
// Aborted, the jobs sent ahead go to other workers) and returns.
func Agent(ctx context.Context, joinFile string, n int, stdout, stderr io.Writer) error {
	if n < 1 {
		return fmt.Errorf("cluster: an agent of %d workers", n)
	}
	s, err := dial(joinFile, "poolrun agent")
	if err != nil {
		return err
	}
	defer s.close()
	s.agent = nuid.Next()
	wins := &agentWindows{workers: map[string]mirrored{}, early: map[string]part{}}
	sub, err := s.nc.Subscribe(agentSubject(s.agent, "win"), wins.handle)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.lost:
			cancel()
		case <-s.ended:
			cancel()
		case <-ctx.Done():
		}
	}()
	var mu sync.Mutex
	deaths := 0 // in a row, of workers that lived less than agentShortLife
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				start := time.Now()
				stopped, err := s.serveOne(ctx, wins, stdout, stderr)
				if err == nil && stopped {
					return // the pool stopped it: its run is over
				}
				if ctx.Err() != nil || s.poolEnded() {
					return
				}
				mu.Lock()
				if time.Since(start) >= agentShortLife {
					deaths = 0
				}
				deaths++
				d := deaths
				mu.Unlock()
				if d >= agentDeathLimit {
					errs[i] = fmt.Errorf("cluster: agent: %d workers in a row died within %v of their start: %w", d, agentShortLife, err)
					cancel()
					return
				}
				if err != nil {
					fmt.Fprintf(stderrOr(stderr), "poolrun agent: worker %d: %v; starting another\n", i+1, err)
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// agentDeathLimit is how many of an agent's workers may die in a row,
// each within agentShortLife of its start, before the agent gives up.
const (
	agentDeathLimit = 5
	agentShortLife  = 10 * time.Second
)

func stderrOr(w io.Writer) io.Writer {
	if w == nil {
		return os.Stderr
	}
	return w
}

// serveOne starts a worker process, joins it to the pool, and relays for
// it until it ends; stopped says that the pool stopped it (it exited with
// status 0), err why it ended otherwise.
func (s *session) serveOne(ctx context.Context, wins *agentWindows, stdout, stderr io.Writer) (stopped bool, err error) {
	id := nuid.Next()
	jobs, err := newStreamReader(s.nc, workerSubject(id, "jobs"))
	if err != nil {
		return false, err
	}
	defer jobs.Close()
	ctl, err := newStreamReader(s.nc, workerSubject(id, "ctl"))
	if err != nil {
		return false, err
	}
	defer ctl.Close()
	capacity, err := s.join(ctx, id, os.Getpid())
	if errors.Is(err, errPoolEnded) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if capacity < 1 {
		return false, errors.New("cluster: the pool's answer gives no window capacity")
	}
	// The pool has sent the handshake already: it waits in jobs until the
	// worker reads it; its window's first set waits in wins.
	wp, err := engine.StartWorkerProcess(capacity, stdout, stderr)
	if err != nil {
		return false, err
	}
	ended := make(chan error, 1)
	go func() { ended <- wp.Wait() }()
	wins.add(id, wp, capacity)
	defer wins.remove(id)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go s.ping(wctx, id, func() {})
	go func() {
		io.Copy(wp.Jobs(), jobs)
		wp.Jobs().Close() // the pool closed the stream: the worker ends
	}()
	go io.Copy(wp.Control(), ctl)
	rep := newStreamWriter(s.nc, workerSubject(id, "rep"))
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(flushedWriter{rep}, wp.Replies())
	}()
	select {
	case err = <-ended:
	case <-ctx.Done():
		wp.Terminate(2 * time.Second)
		err = <-ended
	}
	<-copied // every reply the worker wrote has gone to the pool
	rep.Close()
	return err == nil, err
}

// agentWindows are the windows of an agent's workers: each message on the
// agent's window subject brings the sets that changed, which go to the
// workers' windows in shared memory at the pool's generations. A set for
// a worker whose process is not started yet waits for it.
type agentWindows struct {
	mu      sync.Mutex
	workers map[string]mirrored
	early   map[string]part
}

// mirrored is a worker process with its window's capacity.
type mirrored struct {
	wp       *engine.WorkerProcess
	capacity int
}

func (a *agentWindows) handle(m *nats.Msg) {
	a.mu.Lock()
	defer a.mu.Unlock()
	decodeParts(m.Data, func(id string, p part) {
		if w, ok := a.workers[id]; ok {
			w.publish(p)
		} else if q, ok := a.early[id]; !ok || q.gen < p.gen {
			a.early[id] = p
		}
	})
}

func (a *agentWindows) add(id string, wp *engine.WorkerProcess, capacity int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := mirrored{wp: wp, capacity: capacity}
	a.workers[id] = w
	if p, ok := a.early[id]; ok {
		delete(a.early, id)
		w.publish(p)
	}
}

func (a *agentWindows) remove(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.workers, id)
}

// publish puts p in the worker's window; an overflowed set as more keys
// than the window holds, which it takes for an overflow. A set older than
// the window's (a message that came late) is dropped.
func (w mirrored) publish(p part) {
	keys := p.keys
	if p.over {
		keys = make([]uint64, w.capacity+1)
		for i := range keys {
			keys[i] = uint64(i + 1)
		}
	}
	w.wp.Publish(keys, p.gen)
}
