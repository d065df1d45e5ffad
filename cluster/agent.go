package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nuid"

	"github.com/poolrun/poolrun/internal/enginehost"
	"github.com/poolrun/poolrun/internal/spawn"
	"github.com/poolrun/poolrun/shm"
)

// Agent joins the pool of joinFile as one host agent: one connection to
// the pool's server, and n worker processes of this program behind it
// (the very processes a local pool starts), or n goroutines with
// [InProcess].
//
// The pool sends the agent its workers' jobs, control and windows on one
// stream; the agent sends their replies back on another (host.go). It
// relays each worker's frames between those streams and the worker's
// pipes. It writes each worker's window, in shared memory, from the
// pool's sets at the pool's generations; the workers read it with atomic
// loads, as on the pool's host.
//
// A worker that dies while the pool runs is replaced (its running job is
// Aborted, or run again with retries, as any worker's); after five workers
// in a row died within agentShortLife of their start, the agent gives up
// and returns an error (a worker that lived longer starts the count
// again). A worker that the pool kills (a timeout, a cancel not heeded, a
// worker silent) is killed, and replaced.
//
// The agent holds a lease from the pool: each of its pings carries when
// it was sent, the pool echoes it while it counts the host as its own,
// and the lease lasts half the pool's silence limit from the sending of
// the latest ping echoed. When it ends (the pool stopped, Ctrl-Z, or cut
// off), the agent stops its workers and the commands of their jobs
// (SIGSTOP), and continues them once an echo renews it: what comes from
// the pool meanwhile, sent before it gave the host up, renews nothing.
// Each worker process holds the agent's lease too (engine's
// WorkerProcess.Lease), and stops its commands when it ends, the agent
// stopped or hung. If the pool says it has given this host up, the agent
// kills its workers and their commands and returns an error: the pool
// has given their jobs to other workers, and nothing of them runs on
// beside those. When a worker process dies, the agent kills its
// commands before it tells the pool.
//
// Agent returns once the pool has stopped all of its workers, or has
// ended. When ctx ends, it terminates its workers (SIGTERM: their running
// jobs are cancelled and Aborted, the jobs sent ahead go to other
// workers) and returns. When its connection or the pool's stream ends
// without the pool's word that it ended (the pool killed, say), it kills
// its workers' commands, terminates its workers and returns an error. The
// agent's workers die with its process (a parent-death signal).
func Agent(ctx context.Context, joinFile string, n int, stderr io.Writer, opts ...AgentOption) error {
	if n < 1 {
		return fmt.Errorf("cluster: an agent of %d workers", n)
	}
	id := nuid.Next()
	start := time.Now() // the lease counts from the join request: the pool's answer is its first echo
	s, err := dial(joinFile, agentName(id))
	if err != nil {
		return err
	}
	defer s.close()
	down, err := newStreamReader(s.nc, hostSubject(id, "down"))
	if err != nil {
		return err
	}
	defer down.Close()
	answer, err := s.join(ctx, id)
	if errors.Is(err, errPoolEnded) {
		return nil
	}
	if err != nil {
		return err
	}
	if answer.Capacity < 1 {
		return errors.New("cluster: the pool's answer gives no window capacity")
	}
	if answer.Silence <= 0 {
		return errors.New("cluster: the pool's answer gives no silence limit")
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a := &agent{
		s: s, capacity: answer.Capacity, stderr: stderrOr(stderr),
		up:         newSender(newStreamWriter(s.nc, hostSubject(id, "up"))),
		start:      start,
		fenceAfter: answer.Silence / 2,
		tag:        spawn.Tag(os.Getpid()),
		workers:    map[uint64]*agentWorker{},
		starting:   make(chan struct{}, runtime.NumCPU()),
	}
	for _, o := range opts {
		o(a)
	}
	defer a.up.close()
	go func() {
		if err := a.read(down); !errors.Is(err, errHostGone) {
			a.lose(fmt.Errorf("its stream to this host ended: %w", err))
		}
		cancel()
	}()
	go func() {
		select {
		case <-s.lost:
			a.lose(errors.New("the connection to its server closed"))
		case <-s.ended:
		case <-ctx.Done():
		}
		cancel()
	}()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		a.watch(ctx)
	}()
	var mu sync.Mutex
	deaths := 0 // in a row, of workers that lived less than agentShortLife
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				start := time.Now()
				stopped, err := a.serveOne(ctx)
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
				if err != nil && !killedForPool(err) {
					fmt.Fprintf(a.stderr, "poolrun agent: worker %d: %v; starting another\n", i+1, err)
				}
			}
		})
	}
	wg.Wait()
	cancel()
	<-watched
	if g := a.gone.Load(); g != nil {
		return *g
	}
	if l := a.lost.Load(); l != nil && parent.Err() == nil && !s.poolEnded() {
		return fmt.Errorf("%w at %s: %v without its word that it ended (was it killed, or its host cut off?); what its jobs ran here was killed", errPoolLost, s.j.URL, *l)
	}
	return errors.Join(errs...)
}

// errPoolLost says that the agent lost its pool: it was not told that the
// pool ended, nor that the pool gave the host up.
var errPoolLost = errors.New("cluster: lost the pool")

// lateWindows, in tests, makes the agent put the pool's sets in its
// workers' windows that late, after their jobs (TestLateWindow).
var lateWindows time.Duration

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

// An agent is the agent's side of a host: its workers, by slot.
type agent struct {
	s        *session
	capacity int
	stderr   io.Writer // what the agent itself says
	up       *sender

	// starting holds a token per worker process that has started but not
	// yet spoken (its handshake): a host starts at most as many at a
	// time as it has CPUs, so that a start of hundreds of workers does
	// not starve the agent, its pings, and the host.
	starting chan struct{}

	inProcess bool // its workers are goroutines (InProcess)

	// The lease: start, and the sending of the latest ping that the pool
	// echoed (confirmed, in ns after start), plus fenceAfter.
	start      time.Time
	fenceAfter time.Duration
	confirmed  atomic.Int64

	tag   string // this process's, in its commands' spawn.OwnerEnv marks
	gone  atomic.Pointer[error]
	lost  atomic.Pointer[error] // why the pool was lost, if it was
	slots atomic.Uint64         // the last slot given

	mu      sync.Mutex
	workers map[uint64]*agentWorker
	fenced  bool
}

// An agentWorker is one of the agent's worker processes, with what the
// pool sent it and its pipes have not taken yet.
type agentWorker struct {
	wp        enginehost.WorkerProcess // or, with InProcess:
	tag       string                   // the process's, in its commands' marks
	win       *shm.Window              // the goroutine's window
	cancel    context.CancelFunc       // ends the goroutine's serving
	jobs, ctl *pipe
	out       *agentOutput // what it prints, to the pool
	killed    atomic.Bool  // by the agent, for the pool
	refused   atomic.Bool  // by the pool, which no longer admits workers
}

// read reads what the pool sends until the stream ends, and returns why
// it ended.
func (a *agent) read(down io.Reader) error {
	rr := newRecordReader(down)
	for {
		kind, slot, payload, err := rr.next()
		if err != nil {
			return err
		}
		switch kind {
		case recGone:
			err := fmt.Errorf("%w: %s", errHostGone, payload)
			a.gone.Store(&err)
			killCommands(spawn.OwnedByPool(a.tag))
			a.mu.Lock()
			for _, w := range a.workers {
				w.kill()
			}
			a.mu.Unlock()
			return err
		case recPing:
			// The echo of a ping of this agent's: the pool counted the
			// host as its own when it read it.
			if sent, n := binary.Uvarint(payload); n > 0 && int64(sent) > a.confirmed.Load() {
				a.confirmed.Store(int64(sent))
			}
			continue
		}
		a.mu.Lock()
		w := a.workers[slot]
		a.mu.Unlock()
		if w == nil {
			continue // the worker has ended
		}
		switch kind {
		case recJobs:
			w.jobs.write(payload)
		case recCtl:
			w.ctl.write(payload)
		case recClose:
			w.jobs.end(io.EOF)
			switch {
			case len(payload) != 1:
			case payload[0] == closeKill:
				w.kill()
			case payload[0] == closeRefused:
				w.refused.Store(true)
				w.kill()
			}
		case recGrant:
			w.out.grant(payload)
		case recWin:
			p, err := decodePart(payload)
			if err != nil {
				return err
			}
			keys := p.keys
			if p.over {
				// More keys than the window holds: it says "keep
				// everything".
				keys = make([]uint64, a.capacity+1)
				for i := range keys {
					keys[i] = uint64(i + 1)
				}
			}
			if lateWindows > 0 {
				time.AfterFunc(lateWindows, func() { w.publish(keys, p.gen) })
				continue
			}
			w.publish(keys, p.gen)
		}
	}
}

// lose notes that the pool was lost, and why, unless it was already.
func (a *agent) lose(why error) {
	a.lost.CompareAndSwap(nil, &why)
}

// publish puts a set of the pool's in the worker's window at gen.
func (w *agentWorker) publish(keys []uint64, gen uint64) {
	if w.wp != nil {
		w.wp.Publish(keys, gen)
	} else {
		w.win.PublishAt(keys, gen)
	}
}

// kill kills the worker at once (and, with its process group, what its
// job started there; the commands of its jobs die with it). A goroutine
// worker can only be told to leave.
func (w *agentWorker) kill() {
	w.killed.Store(true)
	if w.wp == nil {
		w.cancel()
		return
	}
	syscall.Kill(-w.wp.PID(), syscall.SIGCONT) // a stopped worker dies too
	w.wp.Terminate(0)
}

// killedForPool reports whether err is the end of a worker the agent
// killed for the pool.
func killedForPool(err error) bool {
	var k *killedWorker
	return errors.As(err, &k)
}

type killedWorker struct{ err error }

func (k *killedWorker) Error() string { return "killed for the pool: " + k.err.Error() }
func (k *killedWorker) Unwrap() error { return k.err }

// watch keeps the lease (see [Agent]): it pings the pool every pingEvery
// with the time of sending, hands each renewal of the lease on to the
// workers, and stops them once the lease has ended, until a renewal.
// When ctx ends, it kills the workers' commands if the pool was lost, or
// gave the host up, or the lease had ended (their jobs may run elsewhere
// by now), and continues the workers, so that they can end.
func (a *agent) watch(ctx context.Context) {
	t := time.NewTicker(pingEvery / 2)
	defer t.Stop()
	var pinged, leased time.Time
	for {
		select {
		case <-ctx.Done():
			if a.lost.Load() != nil || a.gone.Load() != nil || !time.Now().Before(a.leaseEnd()) {
				killCommands(spawn.OwnedByPool(a.tag))
			}
			a.fence(false)
			return
		case <-t.C:
			now := time.Now()
			if now.Sub(pinged) >= pingEvery {
				a.up.put(recPing, 0, binary.AppendUvarint(nil, uint64(now.Sub(a.start))))
				pinged = now
			}
			end := a.leaseEnd()
			live := now.Before(end)
			if live && !end.Equal(leased) {
				a.lease(end) // before the workers go on, if they were stopped
				leased = end
			}
			// Said once it is done.
			switch {
			case !a.fence(!live):
			case live:
				fmt.Fprintln(a.stderr, "poolrun agent: the pool speaks again: its workers here go on")
			default:
				fmt.Fprintf(a.stderr, "poolrun agent: no word from the pool for %v: its workers here are stopped until it speaks\n", a.fenceAfter)
			}
		}
	}
}

// leaseEnd is when the agent's lease ends: fenceAfter after the sending
// of the latest ping that the pool echoed.
func (a *agent) leaseEnd() time.Time {
	return a.start.Add(time.Duration(a.confirmed.Load()) + a.fenceAfter)
}

// lease gives the agent's worker processes the lease that ends at end.
func (a *agent) lease(end time.Time) {
	a.mu.Lock()
	var wps []enginehost.WorkerProcess
	for _, w := range a.workers {
		if w.wp != nil {
			wps = append(wps, w.wp)
		}
	}
	a.mu.Unlock()
	for _, wp := range wps {
		wp.Lease(end)
	}
}

// fence stops (on) or continues (off) the agent's workers, their process
// groups, and the commands of their jobs, if they are not already, and
// reports whether they were not.
func (a *agent) fence(on bool) bool {
	a.mu.Lock()
	if a.fenced == on {
		a.mu.Unlock()
		return false
	}
	a.fenced = on
	var groups []int
	for _, w := range a.workers {
		if w.wp != nil {
			groups = append(groups, w.wp.PID())
		}
	}
	a.mu.Unlock()
	sig := syscall.SIGCONT
	if on {
		sig = syscall.SIGSTOP
	}
	for _, pid := range groups {
		syscall.Kill(-pid, sig)
	}
	// Found in /proc, which takes a while on a host of many processes:
	// not under the lock that the relaying takes.
	spawn.SignalTagged(spawn.OwnedByPool(a.tag), sig)
	return true
}

// serveOne starts a worker process, opens it to the pool, and relays for
// it until it ends; stopped says that the pool stopped it (it exited with
// status 0), err why it ended otherwise.
func (a *agent) serveOne(ctx context.Context) (stopped bool, err error) {
	if a.inProcess {
		return a.serveGoroutine(ctx)
	}
	select {
	case a.starting <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	var startOnce sync.Once
	started := func() { startOnce.Do(func() { <-a.starting }) }
	defer started()
	// What it prints goes to the pool, once the pool knows of it.
	slot := a.slots.Add(1)
	out := newAgentOutput(a.up, slot)
	defer out.close()
	wp, err := eng.StartWorkerProcess(a.capacity, out.stream(recOut), out.stream(recErr))
	if err != nil {
		return false, err
	}
	// Its tag, read before it is reaped, names its commands once it has
	// gone.
	w := &agentWorker{wp: wp, tag: spawn.Tag(wp.PID()), jobs: newPipe(), ctl: newPipe(), out: out}
	a.mu.Lock()
	a.workers[slot] = w
	wp.Lease(a.leaseEnd()) // ended already, if the agent is fenced
	if a.fenced {
		syscall.Kill(-wp.PID(), syscall.SIGSTOP)
	}
	a.mu.Unlock()
	ended := make(chan error, 1)
	go func() { ended <- wp.Wait() }()
	go pump(w.jobs, wp.Jobs(), true)
	go pump(w.ctl, wp.Control(), false)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		buf := make([]byte, 64<<10)
		for {
			n, err := wp.Replies().Read(buf)
			started() // it speaks, or has ended
			if n > 0 {
				a.up.putData(recReply, slot, buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	a.up.put(recOpen, slot, binary.AppendUvarint(nil, uint64(wp.PID())))
	out.opened()
	select {
	case err = <-ended:
	case <-ctx.Done():
		wp.Terminate(2 * time.Second)
		// Its last output goes to a pool that still reads it; one that
		// does not holds up the worker's end no longer than that.
		t := time.AfterFunc(2*time.Second, out.close)
		defer t.Stop()
		err = <-ended
	}
	if err != nil {
		// What its commands left running ends before the pool hears of
		// its end, and runs its job again.
		killCommands(func(entry string) bool {
			return spawn.Marked(entry, func(pool, worker string) bool { return pool == a.tag && worker == w.tag })
		})
	}
	<-copied // every reply the worker wrote goes to the pool before its end
	a.mu.Lock()
	delete(a.workers, slot)
	a.mu.Unlock()
	w.jobs.Close()
	w.ctl.Close()
	if w.refused.Load() {
		// The pool has stopped admitting workers: its run is over.
		return true, nil
	}
	if err != nil && w.killed.Load() {
		err = &killedWorker{err}
	}
	why := ""
	if err != nil {
		why = err.Error()
	}
	a.up.put(recEnd, slot, []byte(why))
	return err == nil, err
}

// pump writes what comes in p to w, until p ends (then it closes w, if
// closeAtEnd) or is closed.
func pump(p *pipe, w io.WriteCloser, closeAtEnd bool) {
	for {
		bufs, err := p.next()
		if err != nil {
			if closeAtEnd && err == io.EOF {
				w.Close()
			}
			return
		}
		for _, b := range bufs {
			if _, err := w.Write(b); err != nil {
				p.Close() // the worker is gone: drop what comes
				return
			}
		}
	}
}

// killCommands kills (SIGKILL) the processes of this user's that match:
// commands of the agent's workers, and what they started (spawn.OwnerEnv
// marks them: a worker's pool, in the mark, is its parent, the agent),
// children first, so that a stopped one dies without running again (see
// spawn.KillTagged). It kills again until it finds none, for up to
// killWait: a process that forked meanwhile is found the next time, and
// one found no more has ended (it may wait to be reaped, but runs no
// more).
func killCommands(match func(entry string) bool) {
	for deadline := time.Now().Add(killWait); spawn.KillTagged(match) > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

// killWait bounds killCommands.
const killWait = 2 * time.Second

// serveGoroutine serves the pool with a worker that is a goroutine of the
// agent's process (InProcess): enginehost.Engine.Serve, with a cache of its own and
// a window in shared memory that the agent writes, until the pool stops
// it (stopped), it is killed (it leaves), or ctx ends.
func (a *agent) serveGoroutine(ctx context.Context) (stopped bool, err error) {
	win, err := shm.Create(a.capacity)
	if err != nil {
		return false, err
	}
	defer win.Close()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slot := a.slots.Add(1)
	out := newAgentOutput(a.up, slot)
	w := &agentWorker{win: win, cancel: cancel, jobs: newPipe(), ctl: newPipe(), out: out}
	a.mu.Lock()
	a.workers[slot] = w
	a.mu.Unlock()
	a.up.put(recOpen, slot, binary.AppendUvarint(nil, uint64(os.Getpid())))
	out.opened()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(2*time.Second, out.close) })
	err = eng.Serve(wctx, w.jobs, replyWriter{a.up, slot}, w.ctl, win, out.stream(recOut), out.stream(recErr))
	stop()
	out.close()
	a.mu.Lock()
	delete(a.workers, slot)
	a.mu.Unlock()
	w.jobs.Close()
	w.ctl.Close()
	if w.refused.Load() {
		return true, nil // the pool has stopped admitting workers
	}
	if err == nil && wctx.Err() != nil && ctx.Err() == nil {
		err = &killedWorker{errors.New("it left the pool")}
	}
	why := ""
	if err != nil {
		why = err.Error()
	}
	a.up.put(recEnd, slot, []byte(why))
	return err == nil, err
}

// replyWriter is a goroutine worker's replies: records of the host's up
// stream.
type replyWriter struct {
	up   *sender
	slot uint64
}

func (r replyWriter) Write(p []byte) (int, error) {
	if err := r.up.putData(recReply, r.slot, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// An AgentOption is an option of [Agent].
type AgentOption func(*agent)

// InProcess makes the agent's workers goroutines of its own process
// (enginehost.Engine.Serve, each with a cache of its own and a window in shared
// memory), not worker processes: no process to start per worker, as
// engine.InProcess for a local pool. Such a worker cannot be killed, nor
// stopped while the pool is silent: a job that never returns holds its
// goroutine, and a worker that the pool gives up only leaves (its job's
// context is cancelled). It suits jobs of pure Go that return when
// cancelled, and measurements of the pool with many workers on few cores.
func InProcess() AgentOption {
	return func(a *agent) { a.inProcess = true }
}
