package cluster_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/cluster"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/proctest"
)

// startAgents starts n host agents of two workers each (the test binary)
// for the pool of joinFile.
func startAgents(t *testing.T, joinFile string, n int) []*exec.Cmd {
	t.Helper()
	return startRoles(t, envAgent+"="+joinFile, n)
}

// agentPool starts a pool's listener and n host agents of two workers
// each for it; the listener closes when t ends.
func agentPool(t *testing.T, n int) (*cluster.Listener, []*exec.Cmd) {
	t.Helper()
	joinFile := filepath.Join(t.TempDir(), "run.join")
	l, err := listen("", joinFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, startAgents(t, joinFile, n)
}

// TestAgents: two host agents of two worker processes each join a pool
// that has no worker of its own: the server has three clients (the pool
// and one per agent), the four workers take jobs, every result is right,
// and the agents exit with status 0 when the pool ends.
func TestAgents(t *testing.T) {
	joinFile := filepath.Join(t.TempDir(), "run.join")
	l, srv, err := listenServer("", joinFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	agents := startAgents(t, joinFile, 2)
	p := engine.New(engine.RemoteOnly(time.Minute), l.Option())
	var jobs []*engine.Job[int]
	for i := range 400 {
		jobs = append(jobs, engine.Queue(p, slowSquare, i))
	}
	clients := 0
	p.Go(func(ctx context.Context) error {
		// Every worker has joined once the pool has four.
		err := poll(ctx, "four workers", func() bool { return len(p.Stats().Workers) == 4 })
		clients = srv.Clients()
		return err
	})
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	squaresRight(t, jobs)
	if clients != 3 {
		t.Errorf("%d clients of the server with four workers on two agents, want 3", clients)
	}
	pids := map[int]bool{}
	for _, w := range p.Stats().Workers {
		pids[w.PID] = true
		if w.Jobs == 0 {
			t.Errorf("worker %d (pid %d) ran no job", w.Index, w.PID)
		}
	}
	if len(pids) != 4 {
		t.Errorf("%d distinct worker processes, want 4", len(pids))
	}
	exitZero(t, "agent", agents)
}

var (
	itemA = cachepool.Define("cluster_test.agent.A", func(context.Context) (int, error) { return 1, nil })
	itemB = cachepool.Define("cluster_test.agent.B", func(context.Context) (int, error) { return 2, nil })

	// usePhase gets item A or B and returns its value.
	usePhase = engine.Register("cluster_test.use-phase", func(ctx context.Context, which string) (int, error) {
		time.Sleep(time.Millisecond)
		if which == "B" {
			return itemB.Get(ctx)
		}
		return itemA.Get(ctx)
	})
)

// TestAgentWindow: an agent's workers read windows in shared memory that
// the agent writes from the pool's sets: a worker builds A and B once
// each, and evicts A when no job needs it any more (the B jobs wait for
// every A job); if the windows stayed empty or behind, a worker would keep
// A to the end.
func TestAgentWindow(t *testing.T) {
	l, agents := agentPool(t, 1)
	p := engine.New(engine.RemoteOnly(time.Minute), l.Option())
	var deps []engine.Dep
	for range 40 {
		deps = append(deps, engine.Queue(p, usePhase, "A", engine.Needs(itemA)))
	}
	var bs []*engine.Job[int]
	for range 40 {
		bs = append(bs, engine.Queue(p, usePhase, "B", engine.Needs(itemB), engine.After(deps...)))
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, j := range bs {
		if v, err := j.Result(); err != nil || v != 2 {
			t.Fatalf("job %d: %d, %v", j.ID(), v, err)
		}
	}
	evicted := uint64(0)
	for _, w := range p.Stats().Workers {
		if w.Cache.Builds > 2 {
			t.Errorf("worker %d built %d items, want at most A and B once each", w.Index, w.Cache.Builds)
		}
		evicted += w.Evicted
	}
	if evicted == 0 {
		t.Error("no worker evicted A once the B jobs ran: the agent's windows do not follow the pool's sets")
	}
	if err := agents[0].Wait(); err != nil {
		t.Errorf("the agent: %v", err)
	}
}

// TestAgentKills: with retries, a worker process SIGKILLed under its agent
// is replaced by the agent, and an agent SIGKILLed (its workers die with
// it) is given up by the pool within its silence limit; every job
// succeeds with the right result on the workers left.
func TestAgentKills(t *testing.T) {
	l, agents := agentPool(t, 2)
	var mu sync.Mutex
	died := map[int]time.Time{} // by pid
	p := engine.New(engine.RemoteOnly(time.Minute), engine.Retries(3), l.Option(), engine.OnEvent(func(e engine.Event) {
		if e.Kind == engine.WorkerDied {
			mu.Lock()
			died[e.PID] = e.Time
			mu.Unlock()
		}
	}))
	var jobs []*engine.Job[int]
	for i := range 600 {
		jobs = append(jobs, engine.Queue(p, slowSquare, i))
	}
	var killedAt time.Time
	var orphans []int // the killed agent's workers
	p.Go(func(ctx context.Context) error {
		if err := poll(ctx, "four workers", func() bool { return len(p.Stats().Workers) == 4 }); err != nil {
			return err
		}
		if err := poll(ctx, "jobs done", func() bool { return jobs[50].Status().Done() }); err != nil {
			return err
		}
		// A worker of the first agent: not one of the second's children.
		for _, w := range p.Stats().Workers {
			if w.Live && proctest.ParentOf(w.PID) != agents[1].Process.Pid {
				syscall.Kill(w.PID, syscall.SIGKILL)
				break
			}
		}
		if err := poll(ctx, "more jobs done", func() bool { return jobs[200].Status().Done() }); err != nil {
			return err
		}
		for _, w := range p.Stats().Workers {
			if w.Live && proctest.ParentOf(w.PID) == agents[1].Process.Pid {
				orphans = append(orphans, w.PID)
			}
		}
		killedAt = time.Now()
		return agents[1].Process.Kill()
	})
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	squaresRight(t, jobs)
	st := p.Stats()
	t.Logf("%d places; the run went on %v after the agent's kill", len(st.Workers), time.Since(killedAt).Round(time.Millisecond))
	if len(st.Workers) < 5 {
		t.Errorf("%d places: the killed worker was not replaced by its agent", len(st.Workers))
	}
	agents[1].Wait()
	if len(orphans) != 2 {
		t.Errorf("the killed agent had %d workers, want 2", len(orphans))
	}
	for _, pid := range orphans {
		// Its parent's death ends a worker process (SIGTERM).
		err := poll(context.Background(), fmt.Sprintf("worker %d to exit", pid), func() bool { return !proctest.Alive(pid) })
		if err != nil {
			t.Error(err)
		}
		// The pool sees the agent's connection close: it gives its
		// workers up at once, not after the silence limit.
		mu.Lock()
		at, ok := died[pid]
		mu.Unlock()
		if d := at.Sub(killedAt); !ok || d > 3*time.Second {
			t.Errorf("the killed agent's worker %d was given up %v after the kill (seen: %v), want within 3 s", pid, d.Round(time.Millisecond), ok)
		} else {
			t.Logf("the killed agent's worker %d was given up %v after the kill", pid, d.Round(time.Millisecond))
		}
	}
	if err := agents[0].Wait(); err != nil {
		t.Errorf("the agent that was not killed: %v", err)
	}
}

// TestAgentLeaves: an agent asked to stop (SIGTERM) while the pool runs
// has its workers leave cleanly, with a goodbye: it exits with status 0,
// the pool runs every job on the other agent's workers, and Run returns
// no error.
func TestAgentLeaves(t *testing.T) {
	l, agents := agentPool(t, 2)
	p := engine.New(engine.RemoteOnly(time.Minute), l.Option())
	var jobs []*engine.Job[int]
	for i := range 600 {
		jobs = append(jobs, engine.Queue(p, slowSquare, i))
	}
	left := make(chan error, 1)
	p.Go(func(ctx context.Context) error {
		if err := poll(ctx, "four workers", func() bool { return len(p.Stats().Workers) == 4 }); err != nil {
			return err
		}
		if err := poll(ctx, "jobs done", func() bool { return jobs[100].Status().Done() }); err != nil {
			return err
		}
		agents[1].Process.Signal(syscall.SIGTERM)
		go func() { left <- agents[1].Wait() }()
		return nil
	})
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	squaresRight(t, jobs)
	// A worker's goodbye brings its peak memory: every worker said it,
	// those that left as those that the pool stopped.
	for _, w := range p.Stats().Workers {
		if w.PeakRSS == 0 {
			t.Errorf("worker %d (pid %d) did not say goodbye", w.Index, w.PID)
		}
	}
	select {
	case err := <-left:
		if err != nil {
			t.Errorf("the agent asked to stop: %v, want status 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the agent asked to stop had not exited 20 s later")
	}
	if err := agents[0].Wait(); err != nil {
		t.Errorf("the other agent: %v", err)
	}
}

// killsItsWorker kills the process it runs in.
var killsItsWorker = engine.Register("cluster_test.kills-its-worker", func(ctx context.Context, _ struct{}) (struct{}, error) {
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	return struct{}{}, nil
})

// TestAgentGivesUp: an agent whose workers die one after the other, each
// soon after its start, gives up after five and exits with an error that
// says so; the pool, left without workers, fails.
func TestAgentGivesUp(t *testing.T) {
	t.Parallel()
	joinFile := filepath.Join(t.TempDir(), "run.join")
	l, err := listen("", joinFile)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envAgent+"="+joinFile)
	var stderr proctest.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := engine.New(engine.RemoteOnly(5*time.Second), engine.Retries(20), l.Option())
	engine.Queue(p, killsItsWorker, struct{}{})
	if err := p.Run(context.Background()); err == nil {
		t.Error("Run succeeded with a job that kills every worker")
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(stderr.String(), "5 workers in a row died") {
			t.Errorf("the agent: %v, want it to give up after 5 deaths; it said:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the agent still runs 30 s after the pool ended; it said:\n%s", stderr.String())
	}
}

// inProcItems are the items of TestAgentInProcess's jobs.
var inProcItems = []*cachepool.Item[int]{
	cachepool.Define("cluster_test.inproc0", func(context.Context) (int, error) { return 0, nil }),
	cachepool.Define("cluster_test.inproc1", func(context.Context) (int, error) { return 1, nil }),
	cachepool.Define("cluster_test.inproc2", func(context.Context) (int, error) { return 2, nil }),
}

// pid returns the pid of the process that runs it.
var pid = engine.Register("cluster_test.pid", func(ctx context.Context, _ int) (int, error) {
	return os.Getpid(), nil
})

// TestAgentInProcess: an agent whose workers are goroutines of its own
// process (cluster.InProcess) joins with its three workers, which run the
// pool's jobs in the agent's process, each with a cache of its own, and
// leaves with status 0 when the pool ends.
func TestAgentInProcess(t *testing.T) {
	joinFile := filepath.Join(t.TempDir(), "run.join")
	l, err := listen("", joinFile)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	agents := startRoles(t, envAgentInProcess+"="+joinFile, 1)
	p := engine.New(engine.RemoteOnly(time.Minute), l.Option())
	var jobs []*engine.Job[int]
	for i := range 300 {
		jobs = append(jobs, engine.Queue(p, slowSquare, i))
	}
	var pids []*engine.Job[int]
	for i := range 30 {
		pids = append(pids, engine.Queue(p, pid, i, engine.Needs(inProcItems[i%3])))
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	squaresRight(t, jobs)
	for _, j := range pids {
		if v, err := j.Result(); err != nil || v != agents[0].Process.Pid {
			t.Errorf("a job ran in process %d (%v), want the agent's, %d", v, err, agents[0].Process.Pid)
		}
	}
	st := p.Stats()
	if len(st.Workers) != 3 {
		t.Errorf("%d workers, want the agent's 3", len(st.Workers))
	}
	exitZero(t, "agent", agents)
}

// quickSquare is slowSquare without the wait.
var quickSquare = engine.Register("cluster_test.quick-square", func(ctx context.Context, x int) (int, error) {
	return x * x, nil
})

// TestAgentJoinsAsPoolEnds: a pool whose one quick job is done as soon as
// every agent has a worker in ends its run while the agents' other
// workers are still being admitted. Those get no place, and their agents
// must still end, as the others do, although the listener stays open (a
// program that runs one pool after another): a worker admitted in the
// last moment once kept its agent waiting for a handshake that would
// never come. (An agent that has not joined when a run ends waits for the
// next run, or for the listener's close: not this case.)
func TestAgentJoinsAsPoolEnds(t *testing.T) {
	for range 3 {
		l, agents := agentPool(t, 2)
		p := engine.New(engine.RemoteOnly(time.Minute), l.Option())
		job := engine.Queue(p, quickSquare, 3)
		p.Go(func(ctx context.Context) error {
			// Each agent has joined: one of its workers holds a place.
			return poll(ctx, "a worker of each agent", func() bool {
				in := map[int]bool{}
				for _, w := range p.Stats().Workers {
					if w.Live {
						in[proctest.ParentOf(w.PID)] = true
					}
				}
				return in[agents[0].Process.Pid] && in[agents[1].Process.Pid]
			})
		})
		if err := p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if v, err := job.Result(); v != 9 || err != nil {
			t.Fatalf("3 squared: %d, %v", v, err)
		}
		exitZero(t, "agent", agents)
	}
}
