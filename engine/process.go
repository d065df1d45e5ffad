package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/internal/procmem"
	"github.com/poolrun/poolrun/shm"
)

// A worker process's life: started by the pipe transport with the window
// and three pipes as inherited descriptors, it answers the handshake, serves
// jobs (serve.go) and exits.

// leaveEnv marks a worker process started by StartWorkerProcess: on
// SIGTERM it says goodbye to its pool before it exits.
const leaveEnv = "POOLRUN_WORKER_LEAVES"

// WorkerEnv is the environment variable that marks a worker process; its
// value is the protocol version. Programs that start other programs from
// jobs should remove it from their environment.
const WorkerEnv = "POOLRUN_WORKER"

// workerExitGrace is how long a worker asked to stop (SIGTERM, or its parent
// gone) waits for the running job to return before it exits anyway.
const workerExitGrace = 500 * time.Millisecond

// Init must be the first call in main (and in TestMain) of a program that
// runs pools with worker processes. In a worker process (the same binary,
// re-executed by [Pool.Run]) it serves jobs until the pool ends and then
// exits the process; in any other process it returns at once.
//
// A worker process whose main does not call Init first runs main again;
// when it reaches [New] it exits at once, and the pool that started it
// stops with an error wrapping [ErrNoInit] (see there).
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
	serving.Store(true)
	os.Exit(serveProcess(v))
}

// serving is set once Init has begun to serve in this worker process: the
// jobs it runs may make pools, and New tells them from a main that
// skipped Init by it.
var serving atomic.Bool

// isWorker reports whether this process was started as a worker.
func isWorker() bool {
	_, ok := os.LookupEnv(WorkerEnv)
	return ok
}

// exitNoInit is the exit status of a worker process whose main reached
// New without calling Init (EX_CONFIG of sysexits.h): its pool takes it,
// before the handshake, for that mistake (see died).
const exitNoInit = 78

// checkInit ends this process if it is a worker process whose main did
// not call Init first and so runs the program again instead of serving.
// A pool's worker exits with status exitNoInit and prints nothing, since
// the pool says it once, in Run's error; a process started by hand with
// WorkerEnv set says it itself.
func checkInit() {
	if !isWorker() || serving.Load() {
		return
	}
	if win, err := shm.Open(os.NewFile(fdWindow, "window")); err == nil {
		win.Close()
	} else {
		fmt.Fprintf(os.Stderr, "poolrun worker: %s is set, so this process is a pool's worker, but main does not call engine.Init first: %s; unset %s to run the program itself\n",
			WorkerEnv, initAdvice, WorkerEnv)
	}
	os.Exit(exitNoInit)
}

// initAdvice says where Init goes, for the errors that find it missing.
const initAdvice = "worker processes are this program re-executed, so engine.Init() must be the first call in main (and in TestMain), before anything else the program does"

// serveProcess is the whole life of a worker process; it returns the exit
// status.
func serveProcess(version string) int {
	if version != strconv.Itoa(protoVersion) {
		fmt.Fprintf(os.Stderr, "poolrun worker: started by a pool speaking protocol %q, this binary speaks %d\n", version, protoVersion)
		return 2
	}
	// os.NewFile never fails for these numbers; whether the descriptors are
	// open, and what they are, shm.Open and the handshake find out.
	winFile := os.NewFile(fdWindow, "window")
	in := os.NewFile(fdJobs, "jobs")
	out := os.NewFile(fdReply, "replies")
	ctl := os.NewFile(fdControl, "control")
	// The protocol's descriptors are this process's alone: processes that
	// jobs start must not inherit them (a child that outlived its job would
	// keep the reply pipe open, or could write into the protocol).
	for _, fd := range []int{fdWindow, fdJobs, fdReply, fdControl} {
		syscall.CloseOnExec(fd)
	}
	win, err := shm.Open(winFile)
	if err != nil {
		return notAWorker(err)
	}
	// winFile stays open, close-on-exec, for the programs jobs start to
	// read the window themselves (JobWindow).
	// Terminal signals are for the parent, which decides; SIGTERM asks this
	// worker to stop.
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGPIPE)
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), windowFileKey{}, winFile))
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	cache := cachepool.Default()
	var idle atomic.Bool
	var once sync.Once
	// A worker started for a pool elsewhere (StartWorkerProcess) leaves
	// that pool as Serve does: with a goodbye, after its running job.
	leaves := os.Getenv(leaveEnv) == "1"
	if leaves {
		// Its starter's leases (WorkerProcess.Lease), which no job's
		// process may inherit.
		syscall.CloseOnExec(fdLease)
		go holdLease(os.NewFile(fdLease, "lease"))
	}
	var said atomic.Pointer[pipeWorker] // once the handshake is done
	bye := func() {
		if wc := said.Load(); leaves && wc != nil {
			wc.bye(&byeInfo{stats: cache.Stats(), peakRSS: peakRSS()})
		}
	}
	stop := func() {
		once.Do(func() {
			cancel()
			if idle.Load() {
				// Waiting for a job: nothing to let finish.
				cache.Clear()
				bye()
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
	wc, params, err := acceptPipe(in, out, ctl)
	if err == nil {
		said.Store(wc)
		err = serve(ctx, wc, shmReader{win}, cache, params, ownHeap, &idle)
	}
	cache.Clear()
	if ctx.Err() != nil && err != nil {
		bye() // asked to leave after a job
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "poolrun worker:", err)
		return 1
	}
	return 0
}

// notAWorker explains, in one line, that this process was started by hand
// with the worker marker set, and returns exit status 2.
func notAWorker(why error) int {
	fmt.Fprintf(os.Stderr, "poolrun worker: %s is set, so this process is a pool's worker, but it has no pool to serve (%v): workers are started by a running pool; unset %s to run the program itself\n",
		WorkerEnv, why, WorkerEnv)
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

// peakRSS is this process's peak resident memory (procmem.PeakRSS), read
// at most every peakRSSEvery: the goroutine workers of a host agent, which
// share its process, all say it in their goodbyes at once.
func peakRSS() int64 {
	peakMemo.Lock()
	defer peakMemo.Unlock()
	if now := time.Now(); peakMemo.v == 0 || now.Sub(peakMemo.at) >= peakRSSEvery {
		peakMemo.v, peakMemo.at = procmem.PeakRSS(), now
	}
	return peakMemo.v
}

const peakRSSEvery = 50 * time.Millisecond

var peakMemo struct {
	sync.Mutex
	at time.Time
	v  int64
}
