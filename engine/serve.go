package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/poolrun/poolrun/cachepool"
)

// A worker's serve loop, the same in a worker process and in serial mode,
// whatever the transport.

// check is what a worker does with the window before each job: bring its
// view up to generation gen and evict what the window no longer lists
// (sync), and note the evictions for the parent. r.mu is held.
//
// When nothing was published since the last look and the cache holds
// what it held then, there is nothing to decide or note: that costs a
// load of the generation and one of the cache's version. (A look is made
// only under a policy that follows the window, and the note taken after
// it saw the journal at the version of the look or a later one.)
func (r *runner) check(gen uint64) (int, error) {
	if g := r.win.Gen(); r.seen && g == r.seenGen && g >= gen && r.cache.Version() == r.seenVersion {
		return 0, nil
	}
	n, err := r.sync(gen)
	r.takeItems(EvictedByPolicy)
	return n, err
}

// runTask runs one task and fills rep with its reply; when bringing the
// window up to the task's generation evicted items, it first tells the
// parent through wc (so that what the parent knows of the worker's memory
// is not a job late). r.mu is held.
func (r *runner) runTask(ctx context.Context, wc workerConn, t *task, rep *reply) {
	*rep = reply{id: t.id}
	r.cur = t
	if r.win.Gen() < t.gen {
		wc.release() // it may wait for the window: the last reply goes first
	}
	evicted, err := r.check(t.gen)
	if evicted > 0 {
		st := &workerState{evicted: evicted, stats: r.cache.Stats(), resident: r.resident(), items: r.itemNotes()}
		r.version, r.reported = r.cache.Version(), true
		wc.state(st) // a broken pipe shows at the reply
	} else {
		rep.evicted = evicted
	}
	rep.start = time.Now()
	if err != nil && !r.windowWarned {
		// Without a window we cannot tell what to keep: keep everything
		// and run the job; only memory is at stake. Said once.
		r.windowWarned = true
		fmt.Fprintf(os.Stderr, "poolrun worker (pid %d): reading the window: %v; keeping every cached item while it cannot be read (said once)\n", os.Getpid(), err)
	}
	if t.fn != r.fnName {
		r.fn, r.fnName = lookupFunc(t.fn), t.fn
	}
	fn := r.fn
	switch {
	case t.cancelled:
		rep.outcome = outcomeCancelled
		rep.payload = []byte("cancelled before it started")
	case fn == nil:
		rep.outcome = outcomeError
		rep.payload = []byte(fmt.Sprintf("function %q is not registered in the worker process (register it in a package-level var, and call engine.Init first in main)", t.fn))
	default:
		// The job's context ends with the worker's (see serve), at the
		// job's timeout, or when the parent cancels the job.
		jctx, cancel := context.WithCancelCause(r.attemptContext(t.attempt))
		wc.running(t.id, cancel)
		if ctx.Err() != nil {
			cancel(context.Cause(ctx)) // ended before the job was running
		}
		if t.timeout > 0 {
			var stop context.CancelFunc
			jctx, stop = context.WithTimeout(jctx, t.timeout)
			defer stop()
		}
		wc.started(t.id, rep.start) // a broken pipe shows at the reply
		r.busy.Store(true)
		r.watchJob(t.keys)
		res, panicked, err := call(jctx, fn, t.arg, r.maxValue)
		rep.undeclared = r.unwatch()
		r.busy.Store(false)
		wc.running(0, nil)
		switch {
		case t.timeout > 0 && errors.Is(jctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
			rep.outcome = outcomeTimedOut
			rep.payload = []byte(errText(err, panicked))
		case errors.Is(context.Cause(jctx), errParentCancelled):
			rep.outcome = outcomeCancelled
			rep.payload = []byte(errText(err, panicked))
		case ctx.Err() != nil && (err != nil || panicked != nil):
			rep.outcome = outcomeLeft
			rep.payload = []byte(errText(err, panicked))
		case panicked != nil:
			rep.outcome = outcomePanic
			rep.payload = []byte(panicked.Value.(string))
			rep.stack = panicked.Stack
		case err != nil:
			rep.outcome = outcomeError
			rep.payload = []byte(err.Error())
		default:
			rep.payload = res
		}
		if len(rep.undeclared) > 0 && r.watch != nil && r.watch.Strict() && rep.outcome != outcomeCancelled && rep.outcome != outcomeLeft {
			rep.outcome, rep.stack = outcomeError, nil
			rep.payload = []byte(undeclaredError(t.fn, rep.undeclared))
		}
		cancel(nil)
	}
	rep.elapsed = time.Since(rep.start)
	r.cur = nil
	r.takeItems(EvictedForBudget)
	rep.budgetEvicted = int(r.budgetEvicted.Swap(0))
	rep.stats = r.cache.Stats()
	rep.held = rep.stats.Bytes
	r.lastBytes = rep.held
	if r.budget > 0 && rep.held > r.budget {
		rep.overBudget = true
	}
	if n := r.afterJob(); n > 0 {
		rep.evicted += n
		rep.stats = r.cache.Stats()
	}
	r.takeItems(EvictedByPolicy)
	rep.items = r.itemNotes()
	r.report(rep)
}

// attemptContext returns the parent of the context of a job's run number
// attempt: the worker's values and the attempt. Most jobs run once; their
// contexts share one parent.
func (r *runner) attemptContext(attempt int) context.Context {
	if attempt == 1 {
		return r.first
	}
	return context.WithValue(r.base, attemptKey{}, attempt)
}

// heapKind says whose heap a worker's items live in.
type heapKind int

const (
	// sharedHeap: the worker is a goroutine of the pool's process.
	sharedHeap heapKind = iota
	// ownHeap: the worker has its process to itself, and hands the memory
	// its evictions free back to the system (see freeThreshold).
	ownHeap
)

// errParentCancelled is the cause of a job's context that the parent
// cancelled.
var errParentCancelled = errors.New("cancelled by the pool")

// errText says how a job whose context ended returned: "" if it returned
// a value.
func errText(err error, panicked *PanicError) string {
	switch {
	case panicked != nil:
		return "panic: " + panicked.Value.(string)
	case err != nil:
		return err.Error()
	}
	return ""
}

// heartbeat tells the parent that the worker lives, every d while a job
// runs, until stop is closed.
func (r *runner) heartbeat(wc workerConn, d time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if r.busy.Load() {
				if wc.alive() != nil {
					return
				}
			}
		}
	}
}

// call runs fn on arg under ctx, which carries the worker's cache; a
// panic comes back as a *PanicError with the stack.
func call(ctx context.Context, fn *funcEntry, arg []byte, limit int) (res []byte, p *PanicError, err error) {
	defer func() {
		if v := recover(); v != nil {
			p = &PanicError{Op: "job", Value: fmt.Sprint(v), Stack: debug.Stack()}
		}
	}()
	res, err = fn.call(ctx, arg, limit)
	return res, nil, err
}

// serve is a worker's loop, the same in a worker process and in serial
// mode: run each task in order under the pool's parameters and reply to it,
// until told to stop (clear the cache, say goodbye) or the parent is gone.
// It returns ctx.Err() when ctx has ended after a job. While it waits for a
// task, an idle evictor follows the window (see IdleEviction).
//
// idle is set while serve waits for the parent with nothing to do, so that
// a signal handler may end the process at once.
func serve(ctx context.Context, wc workerConn, win windowReader, cache *cachepool.Cache, params workerParams, heap heapKind, idle *atomic.Bool) error {
	defer wc.release()
	var rep reply // each task's, in turn
	r := &runner{win: win, cache: cache, policy: params.policy, budget: params.budget, maxValue: int(params.maxValue), returnMemory: heap == ownHeap}
	// A job's context carries the worker's values and its cache, and is
	// cancelled when the worker's context ends; it is not the worker's
	// context's child, which would cost each job a registration in it.
	r.base = cachepool.WithCache(context.WithoutCancel(ctx), cache)
	r.first = context.WithValue(r.base, attemptKey{}, 1)
	if params.items != itemsIgnored {
		r.watch = cachepool.NewWatch(nil, params.items == itemsStrict)
	}
	defer context.AfterFunc(ctx, func() { wc.control().cancelRunning(context.Cause(ctx)) })()
	cache.SetJournal(true)
	defer cache.SetJournal(false)
	if params.budget > 0 {
		cache.SetBeforeBuild(r.beforeBuild)
		defer cache.SetBeforeBuild(nil)
	}
	if params.idle && params.policy.followsWindow() {
		r.idle, r.waiting = make(chan struct{}, 1), idle
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { defer close(done); r.idleEvict(wc, stop) }()
		defer func() {
			close(stop)
			// It may sleep on the window for up to idlePoll: on a window
			// that can be nudged (in shared memory), it is woken.
			n, ok := win.(interface{ Nudge() })
			for ok {
				n.Nudge()
				select {
				case <-done:
					return
				case <-time.After(time.Millisecond):
				}
			}
			<-done
		}()
	}
	if params.heartbeat > 0 {
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { defer close(done); r.heartbeat(wc, params.heartbeat, stop) }()
		defer func() { close(stop); <-done }()
	}
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !wc.ready() {
			idle.Store(true)
			if r.idle != nil {
				select {
				case r.idle <- struct{}{}:
				default:
				}
			}
		}
		t, stop, err := wc.next()
		idle.Store(false)
		if ctx.Err() != nil {
			return ctx.Err() // start nothing new
		}
		if err == io.EOF {
			return nil // the parent is gone or closed the pipe
		}
		if err != nil {
			return err
		}
		if stop {
			r.mu.Lock()
			cache.Clear()
			r.takeItems(EvictedAtEnd)
			b := &byeInfo{stats: cache.Stats(), peakRSS: peakRSS(), items: r.itemNotes()}
			r.mu.Unlock()
			return wc.bye(b)
		}
		r.mu.Lock()
		r.runTask(ctx, wc, t, &rep)
		r.mu.Unlock()
		if err := wc.done(&rep); err != nil {
			return err
		}
	}
}
