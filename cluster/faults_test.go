package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cluster"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/enginehost"
	"github.com/poolrun/poolrun/internal/proctest"
)

// TestJoinIDInjection: join requests whose id is not a plain token (">",
// "*", "a.b", one too long), from a client that holds the pool's token,
// are refused with a message that says why, and do the pool no harm: its
// connection stays up, its agents keep their workers, every job is right.
func TestJoinIDInjection(t *testing.T) {
	joinFile := filepath.Join(t.TempDir(), "run.join")
	l, err := listen("", joinFile)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	agents := startAgents(t, joinFile, 1)
	p := engine.New(engine.RemoteOnly(time.Minute), l.Option())
	var jobs []*engine.Job[int]
	for i := range 200 {
		jobs = append(jobs, engine.Queue(p, slowSquare, i))
	}
	answers := map[string]string{}
	p.Go(func(ctx context.Context) error {
		if err := poll(ctx, "two workers", func() bool { return len(p.Stats().Workers) == 2 }); err != nil {
			return err
		}
		nc, err := cluster.Dial(joinFile)
		if err != nil {
			return err
		}
		defer nc.Close()
		for _, id := range []string{">", "*", "a.b", "a b", strings.Repeat("x", 65)} {
			req, _ := json.Marshal(map[string]any{"id": id, "protocol": enginehost.ProtocolVersion, "build": hooks.Fingerprint()})
			m, err := nc.Request("poolrun.join", req, 10*time.Second)
			if err != nil {
				return fmt.Errorf("join request of id %q: %w", id, err)
			}
			answers[id] = string(m.Data)
		}
		return nil
	})
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for id, a := range answers {
		if !strings.Contains(a, "not a plain token") {
			t.Errorf("join request of id %q: answered %s, want it refused as not a plain token", id, a)
		}
	}
	if len(answers) != 5 {
		t.Errorf("%d answers, want 5", len(answers))
	}
	squaresRight(t, jobs)
	if n := len(p.Stats().Workers); n != 2 {
		t.Errorf("%d workers in the pool, want the agent's 2", n)
	}
	exitZero(t, "agent", agents)
}

// TestAgentKilledNoRetries: an agent killed (SIGKILL) mid-run, in a pool
// without retries: the jobs its workers ran are Aborted with
// ErrWorkerDied, every other job completes on the other agent's workers.
func TestAgentKilledNoRetries(t *testing.T) {
	l, agents := agentPool(t, 2)
	p := engine.New(engine.RemoteOnly(time.Minute), l.Option())
	var jobs []*engine.Job[int]
	for i := range 600 {
		jobs = append(jobs, engine.Queue(p, slowSquare, i))
	}
	p.Go(func(ctx context.Context) error {
		if err := poll(ctx, "four workers", func() bool { return len(p.Stats().Workers) == 4 }); err != nil {
			return err
		}
		if err := poll(ctx, "jobs done", func() bool { return jobs[100].Status().Done() }); err != nil {
			return err
		}
		return agents[1].Process.Kill()
	})
	err := p.Run(context.Background())
	if !errors.Is(err, engine.ErrWorkerDied) {
		t.Fatalf("Run: %v, want the errors of the jobs of the killed agent's workers", err)
	}
	aborted := 0
	for i, job := range jobs {
		v, err := job.Result()
		switch {
		case job.Status() == engine.Aborted && errors.Is(err, engine.ErrWorkerDied):
			aborted++
		case err != nil || v != i*i:
			t.Errorf("job %d: %v, %d, %v", i, job.Status(), v, err)
		}
	}
	// Each of its two workers had a job running, and may have had one
	// sent ahead of it.
	if aborted < 1 || aborted > 4 {
		t.Errorf("%d jobs Aborted, want those of the killed agent's 2 workers (1 to 4)", aborted)
	}
	t.Logf("%d jobs Aborted with the agent", aborted)
	agents[1].Wait()
	exitZero(t, "the agent not killed", agents[:1])
}

// TestStoppedWorkerFenced: a worker that stops (SIGSTOP) under a job, in
// a pool with retries and a short silence limit, is killed by its agent
// when the pool gives it up, so that the job's first attempt cannot run
// on beside its retry: the job succeeds on another worker, and the
// stopped worker's process is gone soon after.
func TestStoppedWorkerFenced(t *testing.T) {
	t.Parallel()
	l, agents := agentPool(t, 1)
	p := engine.New(engine.RemoteOnly(time.Minute), engine.Retries(1), hooks.SilenceLimit(2*time.Second), l.Option())
	mark := filepath.Join(t.TempDir(), "started")
	long := engine.Queue(p, untilCancelled, waitArg{2 * time.Second, mark})
	var mu sync.Mutex
	stopped := 0
	p.Go(func(ctx context.Context) error {
		if err := poll(ctx, "the job to start", func() bool { return fileExists(mark) }); err != nil {
			return err
		}
		os.Remove(mark) // the retry makes it again
		pid := p.Stats().Workers[long.Worker()-1].PID
		mu.Lock()
		stopped = pid
		mu.Unlock()
		return syscall.Kill(pid, syscall.SIGSTOP)
	})
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := long.Result(); err != nil || len(long.Attempts()) != 2 {
		t.Errorf("the job: %v after %d attempts, want success on its retry", err, len(long.Attempts()))
	}
	mu.Lock()
	pid := stopped
	mu.Unlock()
	if err := poll(context.Background(), fmt.Sprintf("the stopped worker %d to be gone", pid), func() bool { return !proctest.Alive(pid) }); err != nil {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Error(err)
	}
	exitZero(t, "agent", agents)
}

// envStoppedPool makes the test binary the pool of TestStoppedPool, with
// the join file it names.
const envStoppedPool = "POOLRUN_TEST_STOPPED_POOL"

// holdArg is the argument of holdUntil.
type holdArg struct {
	Mark, Release string
}

// holdUntil makes the file a.Mark, then waits until the file a.Release
// exists (or its context ends).
var holdUntil = engine.Register("cluster_test.hold-until", func(ctx context.Context, a holdArg) (int, error) {
	os.WriteFile(a.Mark, nil, 0o644)
	return os.Getpid(), proctest.Poll(ctx, "the release", 10*time.Millisecond, func() bool { return fileExists(a.Release) })
})

// stoppedPool runs two jobs of holdUntil (marks and release in the join
// file's folder) and 100 of slowSquare on remote workers alone, and says
// on its standard output how many workers died and whether every result
// was right.
func stoppedPool(joinFile string) int {
	l, err := listen("", joinFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stopped pool:", err)
		return 1
	}
	defer l.Close()
	var died sync.Map
	p := engine.New(engine.RemoteOnly(time.Minute), l.Option(), engine.OnEvent(func(e engine.Event) {
		if e.Kind == engine.WorkerDied {
			died.Store(e.Worker, fmt.Sprint(e.Err))
		}
	}))
	dir := filepath.Dir(joinFile)
	var holds []*engine.Job[int]
	for i := range 2 {
		holds = append(holds, engine.Queue(p, holdUntil, holdArg{filepath.Join(dir, fmt.Sprint("mark", i)), filepath.Join(dir, "release")}))
	}
	var jobs []*engine.Job[int]
	for i := range 100 {
		jobs = append(jobs, engine.Queue(p, slowSquare, i, engine.After(holds[0], holds[1])))
	}
	err = p.Run(context.Background())
	wrong := 0
	for i, j := range jobs {
		if v, err := j.Result(); err != nil || v != i*i {
			wrong++
		}
	}
	n := 0
	died.Range(func(k, v any) bool {
		n++
		fmt.Printf("worker %v died: %v\n", k, v)
		return true
	})
	fmt.Printf("died=%d wrong=%d err=%v\n", n, wrong, err)
	return 0
}

// fencedRun is a pool of stoppedPool in a process of its own, with one
// agent of two worker processes whose two held jobs have started.
type fencedRun struct {
	dir          string
	pool, agent  *exec.Cmd
	exited       chan error // the pool's Wait
	out, poolErr *proctest.Buffer
	agentErr     *proctest.Buffer
	workers      []int
}

// startFencedRun starts a fencedRun; the cleanups of t end what is left.
func startFencedRun(t *testing.T) *fencedRun {
	t.Helper()
	r := &fencedRun{dir: t.TempDir(), exited: make(chan error, 1),
		out: new(proctest.Buffer), poolErr: new(proctest.Buffer), agentErr: new(proctest.Buffer)}
	joinFile := filepath.Join(r.dir, "run.join")
	r.pool = exec.Command(os.Args[0], "-test.run=^$")
	r.pool.Env = append(os.Environ(), envStoppedPool+"="+joinFile)
	r.pool.Stdout, r.pool.Stderr = r.out, r.poolErr
	if err := r.pool.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.exited <- r.pool.Wait() }()
	t.Cleanup(func() {
		r.pool.Process.Signal(syscall.SIGCONT)
		r.pool.Process.Kill()
		select {
		case <-r.exited:
		case <-time.After(10 * time.Second):
		}
	})
	ctx := context.Background()
	if err := poll(ctx, "the join file", func() bool { return fileExists(joinFile) }); err != nil {
		t.Fatal(err)
	}
	r.agent = exec.Command(os.Args[0], "-test.run=^$")
	r.agent.Env = append(os.Environ(), envAgent+"="+joinFile)
	r.agent.Stderr = r.agentErr
	if err := r.agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if r.agent.ProcessState == nil {
			r.agent.Process.Kill()
			r.agent.Wait()
		}
	})
	for i := range 2 {
		if err := poll(ctx, "the jobs to start", func() bool { return fileExists(filepath.Join(r.dir, fmt.Sprint("mark", i))) }); err != nil {
			t.Fatal(err)
		}
	}
	r.workers = proctest.Children(r.agent.Process.Pid)
	if len(r.workers) != 2 {
		t.Fatalf("the agent has %d children, want its 2 workers", len(r.workers))
	}
	return r
}

// silence stops the pool (SIGSTOP) and waits for the agent to say that
// it stopped its workers, once it has heard nothing for a while; it
// returns the state of each worker that is not stopped (T) a while after.
// (A process stops itself as it takes the signal: one that waits for a
// core on a loaded host takes a moment.)
func (r *fencedRun) silence(t *testing.T) map[int]string {
	t.Helper()
	r.pool.Process.Signal(syscall.SIGSTOP)
	if err := poll(context.Background(), "the agent to stop its workers", func() bool {
		return strings.Contains(r.agentErr.String(), "stopped until it speaks")
	}); err != nil {
		t.Fatal(err)
	}
	running := map[int]string{}
	stopped := func(pid int) bool { return proctest.State(pid) == "T" }
	for _, pid := range r.workers {
		for deadline := time.Now().Add(5 * time.Second); !stopped(pid) && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if st := proctest.State(pid); st != "T" {
			running[pid] = st
		}
	}
	return running
}

// TestStoppedPool: a pool stopped (SIGSTOP, as Ctrl-Z) for longer than the
// silence limit, then continued, keeps its remote workers: no worker is
// given up, and every job completes. Meanwhile the agent, which hears
// nothing from the pool, stops its workers (their jobs cannot run on
// beside a retry), and continues them when the pool speaks again.
func TestStoppedPool(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("stops a pool for 11 s")
	}
	r := startFencedRun(t)
	stoppedAt := time.Now()
	for pid, st := range r.silence(t) {
		t.Errorf("worker %d is in state %q while the pool is silent, want T (stopped)", pid, st)
	}
	// The pool stays stopped for longer than the silence limit.
	time.Sleep(time.Until(stoppedAt.Add(silentFor + time.Second)))
	r.pool.Process.Signal(syscall.SIGCONT)
	if err := os.WriteFile(filepath.Join(r.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-r.exited:
		if err != nil {
			t.Fatalf("the pool: %v\n%s", err, r.poolErr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("the pool had not ended a minute after it was continued")
	}
	if got := r.out.String(); !strings.Contains(got, "died=0 wrong=0 err=<nil>") {
		t.Errorf("the pool, stopped for %v and continued, said:\n%s\nwant no worker given up and every job right", silentFor+time.Second, got)
	}
	if err := r.agent.Wait(); err != nil {
		t.Errorf("the agent: %v\n%s", err, r.agentErr.String())
	}
	said := r.agentErr.String()
	t.Logf("the agent said:\n%s", said)
	if !strings.Contains(said, "stopped until it speaks") || !strings.Contains(said, "the pool speaks again") {
		t.Errorf("the agent did not stop and continue its r.workers while the pool was stopped")
	}
}

// silentFor is the cluster's silence limit (cluster/pool.go).
const silentFor = 10 * time.Second

// TestAgentKilledWhileFenced: an agent killed (SIGKILL) while it holds its
// workers stopped, its pool silent, leaves no worker behind. A worker gets
// SIGTERM when its agent dies, but a stopped one would take it only once
// continued: the kernel does that, as each worker's process group (its
// own, inside the agent's session) is orphaned by the agent's death with
// stopped members, which get SIGHUP and SIGCONT.
func TestAgentKilledWhileFenced(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits 5 s for the agent to stop its workers")
	}
	r := startFencedRun(t)
	t.Cleanup(func() {
		for _, pid := range r.workers {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	for pid, st := range r.silence(t) {
		t.Fatalf("worker %d is in state %q while the pool is silent, want T (stopped)", pid, st)
	}
	r.agent.Process.Kill()
	r.agent.Wait()
	if left := proctest.WaitGone(r.workers, 20*time.Second); len(left) > 0 {
		for _, pid := range left {
			t.Errorf("worker %d is still there (state %s) 20 s after its agent was killed", pid, proctest.State(pid))
		}
	}
}
