package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/shm"
)

// WorkerEnv is the environment variable that marks a worker process; its
// value is the protocol version. Programs that start other programs from
// jobs should remove it from their environment.
const WorkerEnv = "POOLRUN_WORKER"

// The descriptors a worker inherits, after stdin, stdout and stderr.
const (
	fdWindow = 3 // the window, read-only
	fdJobs   = 4 // frames from the parent
	fdReply  = 5 // frames to the parent
)

// workerExitGrace is how long a worker asked to stop (SIGTERM, or its parent
// gone) waits for the running job to return before it exits anyway.
const workerExitGrace = 500 * time.Millisecond

// Init must be the first call in main (and in TestMain) of a program that
// runs pools with worker processes. In a worker process (the same binary,
// re-executed by [Pool.Run]) it serves jobs until the pool ends and then
// exits the process; in any other process it returns at once.
//
// A worker exits on its own when its parent dies: it is sent SIGTERM (a
// parent-death signal, on Linux) or sees the end of its input pipe, lets
// the running job return (its context is cancelled) for up to half a
// second, runs the cleanups of its cached items and exits.
func Init() {
	v, ok := os.LookupEnv(WorkerEnv)
	if !ok {
		return
	}
	os.Exit(serveProcess(v))
}

// isWorker reports whether this process was started as a worker.
func isWorker() bool {
	_, ok := os.LookupEnv(WorkerEnv)
	return ok
}

// serveProcess is the whole life of a worker process; it returns the exit
// status.
func serveProcess(version string) int {
	if version != strconv.Itoa(protoVersion) {
		fmt.Fprintf(os.Stderr, "poolrun worker: started by a pool speaking protocol %q, this binary speaks %d\n", version, protoVersion)
		return 2
	}
	winFile := os.NewFile(fdWindow, "window")
	in := os.NewFile(fdJobs, "jobs")
	out := os.NewFile(fdReply, "replies")
	if winFile == nil || in == nil || out == nil {
		return notAWorker()
	}
	// The protocol's descriptors are this process's alone: processes that
	// jobs start must not inherit them (a child that outlived its job would
	// keep the reply pipe open, or could write into the protocol).
	for _, fd := range []int{fdWindow, fdJobs, fdReply} {
		syscall.CloseOnExec(fd)
	}
	win, err := shm.Open(winFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "poolrun worker:", err)
		return notAWorker()
	}
	winFile.Close()
	// Terminal signals are for the parent, which decides; SIGTERM asks this
	// worker to stop.
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGPIPE)
	ctx, cancel := context.WithCancel(context.Background())
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	cache := cachepool.Default()
	var idle atomic.Bool
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if idle.Load() {
				// Waiting for a job: nothing to let finish.
				cache.Clear()
				os.Exit(0)
			}
			// Give the running job the grace period to return; then run the
			// cleanups (for at most a little longer) and exit anyway.
			time.AfterFunc(workerExitGrace, func() {
				cleared := make(chan struct{})
				go func() { cache.Clear(); close(cleared) }()
				select {
				case <-cleared:
				case <-time.After(workerExitGrace / 2):
				}
				os.Exit(1)
			})
		})
	}
	go func() {
		<-term
		stop()
	}()
	go watchParent(stop)
	err = serve(ctx, in, out, win, cache, &idle)
	cache.Clear()
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "poolrun worker:", err)
		return 1
	}
	return 0
}

func notAWorker() int {
	fmt.Fprintf(os.Stderr, "poolrun worker: this process was started as a worker (%s is set) but has no pool to serve.\n"+
		"Workers are started by a running pool; unset %s to run the program itself.\n", WorkerEnv, WorkerEnv)
	return 2
}

// watchParent cancels the worker when its parent process is gone, for
// systems (or threads) where the parent-death signal does not fire.
func watchParent(cancel func()) {
	parent := os.Getppid()
	for {
		time.Sleep(200 * time.Millisecond)
		if os.Getppid() != parent {
			cancel()
			return
		}
	}
}

// windowView is how a worker sees the window: the generation, and a
// consistent copy of the set. *shm.Window is today's implementation.
type windowView interface {
	Gen() uint64
	Snapshot(dst []uint64) (shm.Snapshot, error)
}

// runner holds a worker's state between jobs.
type runner struct {
	win    windowView
	cache  *cachepool.Cache
	policy EvictPolicy
	snap   shm.Snapshot
	have   bool // snap is valid
}

// sync brings the worker's view of the window to at least generation gen
// and, under EvictStale, evicts from its cache every item the window no
// longer lists. It returns the number of items evicted.
func (r *runner) sync(gen uint64) (int, error) {
	if !r.have || r.win.Gen() != r.snap.Gen {
		deadline := time.Time{}
		for {
			s, err := r.win.Snapshot(r.snap.Keys)
			if err != nil {
				return 0, err
			}
			r.snap, r.have = s, true
			if s.Gen >= gen {
				break
			}
			// The parent publishes before it sends a job, so this is only
			// a reordering of the two; it cannot last.
			if deadline.IsZero() {
				deadline = time.Now().Add(time.Second)
			} else if time.Now().After(deadline) {
				return 0, fmt.Errorf("window generation %d, job needs %d", s.Gen, gen)
			}
		}
	}
	if r.policy != EvictStale {
		// EvictNever keeps everything; under EvictEachJob the cache was
		// cleared after the previous job (see afterJob).
		return 0, nil
	}
	return len(r.cache.EvictGen(r.snap.Gen, r.snap.Contains)), nil
}

// afterJob applies the policy once a job has returned, whatever its
// outcome: EvictEachJob clears the cache. It returns the number of items
// evicted.
func (r *runner) afterJob() int {
	if r.policy != EvictEachJob {
		return 0
	}
	return len(r.cache.Clear())
}

// run runs one task and returns its reply.
func (r *runner) run(ctx context.Context, t *task) *reply {
	rep := &reply{id: t.id}
	evicted, err := r.sync(t.gen)
	rep.evicted = evicted
	rep.start = time.Now()
	if err != nil {
		// Without a window we cannot tell what to keep: keep everything
		// and run the job; only memory is at stake.
		fmt.Fprintln(os.Stderr, "poolrun worker: reading the window:", err)
	}
	fn := lookupFunc(t.fn)
	if fn == nil {
		rep.outcome = outcomeError
		rep.payload = []byte(fmt.Sprintf("function %q is not registered in the worker process (register it in a package-level var, and call engine.Init first in main)", t.fn))
	} else {
		res, err, panicked := call(ctx, fn, t.arg, r.cache)
		switch {
		case panicked != nil:
			rep.outcome = outcomePanic
			rep.payload = []byte(panicked.Value)
			rep.stack = panicked.Stack
		case err != nil:
			rep.outcome = outcomeError
			rep.payload = []byte(err.Error())
		default:
			rep.payload = res
		}
	}
	rep.elapsed = time.Since(rep.start)
	rep.evicted += r.afterJob()
	rep.stats = r.cache.Stats()
	return rep
}

func call(ctx context.Context, fn *funcEntry, arg []byte, cache *cachepool.Cache) (res []byte, err error, p *PanicError) {
	defer func() {
		if v := recover(); v != nil {
			p = &PanicError{Value: fmt.Sprint(v), Stack: debug.Stack()}
		}
	}()
	res, err = fn.call(cachepool.WithCache(ctx, cache), arg)
	return res, err, nil
}

// serve is a worker's loop, the same in a worker process and in serial mode:
// answer the handshake (which names the pool's eviction policy), then run
// each job frame in order under that policy and reply to it,
// until a stop frame (clear the cache, say goodbye) or the end of the input
// (the parent is gone). It returns ctx.Err() when ctx has ended after a job.
//
// idle is set while serve waits for the parent with nothing to do, so that
// a signal handler may end the process at once.
func serve(ctx context.Context, in io.Reader, out io.Writer, win windowView, cache *cachepool.Cache, idle *atomic.Bool) error {
	fr := newFrameReader(in)
	_, policy, err := fr.hello()
	if err != nil {
		return err
	}
	var e enc
	e.hello(os.Getpid(), policy)
	if _, err := out.Write(e.b); err != nil {
		return err
	}

	r := &runner{win: win, cache: cache, policy: policy}
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !fr.buffered() {
			idle.Store(true)
		}
		kind, d, err := fr.next()
		idle.Store(false)
		if err == io.EOF {
			return nil // the parent is gone or closed the pipe
		}
		if err != nil {
			return err
		}
		switch kind {
		case frameJob:
			t, err := d.job()
			if err != nil {
				return err
			}
			rep := r.run(ctx, t)
			e.b = e.b[:0]
			e.done(rep)
			if _, err := out.Write(e.b); err != nil {
				return err
			}
		case frameStop:
			cache.Clear()
			e.b = e.b[:0]
			e.bye(cache.Stats())
			_, err := out.Write(e.b)
			return err
		default:
			return fmt.Errorf("engine: protocol: unexpected frame of kind %d", kind)
		}
	}
}
