package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/poolrun/poolrun/cluster"
	"github.com/poolrun/poolrun/cluster/hub"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/enginehost"
	"github.com/poolrun/poolrun/internal/hubwire"
	"github.com/poolrun/poolrun/internal/proctest"
)

// hooks are what the engine lends tests: options no program needs, and
// the doors package cluster uses (internal/enginehost).
var hooks = enginehost.Get[engine.Option]()

// envParent makes the test binary a pool that listens with the join file
// it names, and runs jobs of a second each until it is killed.
const envParent = "POOLRUN_TEST_PARENT"

func parent(joinFile string) int {
	l, err := listen("", joinFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test parent:", err)
		return 1
	}
	defer l.Close()
	p := engine.New(engine.Workers(0), l.Option())
	for range 1000 {
		engine.Queue(p, sleepy, time.Second)
	}
	p.Run(context.Background())
	return 0
}

var sleepy = engine.Register("cluster_test.sleep", func(ctx context.Context, d time.Duration) (struct{}, error) {
	if dir := os.Getenv(envMarks); dir != "" && os.Getenv(envJoin) != "" {
		// A remote worker runs a job: say so, by its pid.
		os.WriteFile(filepath.Join(dir, strconv.Itoa(os.Getpid())), nil, 0o644)
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	return struct{}{}, nil
})

// gates are the channels that jobs of hold wait on, by name.
var gates sync.Map // string → chan struct{}

// hold keeps the worker that runs it busy until the test opens the gate
// named by its argument (newGate): a job for the pool's serial worker,
// which runs in the test's process, so that the jobs queued after it go to
// remote workers however long they take to join.
var hold = engine.Register("cluster_test.hold", func(ctx context.Context, gate string) (struct{}, error) {
	g, ok := gates.Load(gate)
	if !ok {
		return struct{}{}, fmt.Errorf("no gate %q in process %d: a hold job runs on the serial worker only", gate, os.Getpid())
	}
	select {
	case <-g.(chan struct{}):
	case <-ctx.Done():
	}
	return struct{}{}, nil
})

// newGate makes a gate for a job of hold and returns its name and the
// function that opens it (more than once is harmless); the test's end
// opens it too.
func newGate(t *testing.T) (name string, open func()) {
	ch := make(chan struct{})
	name = t.Name()
	gates.Store(name, ch)
	var once sync.Once
	open = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(func() { open(); gates.Delete(name) })
	return name, open
}

// poll checks cond until it holds, ctx ends, or a minute passes.
func poll(ctx context.Context, what string, cond func() bool) error {
	return proctest.Poll(ctx, what, 10*time.Millisecond, cond)
}

// fileExists reports whether path exists.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// envMarks names a folder where remote workers leave a file named by their
// pid when they run a job of sleepy.
const envMarks = "POOLRUN_TEST_MARKS"

// envJoin makes the test binary a host agent of one worker for the pool
// whose join file it names.
const envJoin = "POOLRUN_TEST_JOIN"

// envAgentInProcess makes the test binary a host agent of three goroutine
// workers (cluster.InProcess) for the pool whose join file it names.
const envAgentInProcess = "POOLRUN_TEST_AGENT_INPROCESS"

// envAgent makes the test binary a host agent of two workers for the pool
// whose join file it names.
const envAgent = "POOLRUN_TEST_AGENT"

func TestMain(m *testing.M) {
	engine.Init()
	// A race-enabled program sleeps a second when it exits (the race
	// detector's atexit_sleep_ms), which every pool's end would wait for;
	// the worker processes skip it.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	// As poolrun-hub, started by StartHub: serve, then exit.
	if os.Getenv(hubwire.Env) != "" {
		if err := hub.Serve(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "test hub:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if f := os.Getenv(envParent); f != "" {
		os.Exit(parent(f))
	}
	if f := os.Getenv(envStoppedPool); f != "" {
		os.Exit(stoppedPool(f))
	}
	if f := os.Getenv(envAgent); f != "" {
		// As poolrun worker -j 2: SIGTERM asks the agent to leave.
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		err := cluster.Agent(ctx, f, 2, nil)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "test agent:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if f := os.Getenv(envAgentInProcess); f != "" {
		err := cluster.Agent(context.Background(), f, 3, nil, cluster.InProcess())
		if err != nil {
			fmt.Fprintln(os.Stderr, "test agent:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if f := os.Getenv(envJoin); f != "" {
		// As poolrun worker -j 1: SIGTERM asks the agent to leave.
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		err := cluster.Agent(ctx, f, 1, nil)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "test worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var slowSquare = engine.Register("cluster_test.square", func(ctx context.Context, x int) (int, error) {
	time.Sleep(5 * time.Millisecond)
	return x * x, nil
})

// TestClusterPool: three worker processes join a running pool through its
// join file, over loopback (and over TLS, listening on every address), and
// take jobs beside the pool's own (serial)
// worker; every result is right, the workers exit with status 0 when the
// pool ends, and no port is left open.
func TestClusterPool(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "0.0.0.0:0"} {
		t.Run(addr, func(t *testing.T) { testClusterPool(t, addr) })
	}
}

// testClusterPool is TestClusterPool with the pool listening on addr:
// plain TCP on loopback, TLS otherwise.
func testClusterPool(t *testing.T, addr string) {
	joinFile := filepath.Join(t.TempDir(), "run.join")
	l, err := listen(addr, joinFile)
	if err != nil && addr != "127.0.0.1:0" && strings.Contains(err.Error(), "no address other than loopback") {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	j, err := cluster.ReadJoinFile(joinFile)
	if err != nil {
		t.Fatal(err)
	}
	workers := startWorkers(t, joinFile, 3)
	p := engine.New(engine.Workers(0), l.Option())
	var jobs []*engine.Job[int]
	for i := range 400 {
		jobs = append(jobs, engine.Queue(p, slowSquare, i))
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	squaresRight(t, jobs)
	st := p.Stats()
	remote := 0
	for _, w := range st.Workers[1:] {
		remote += w.Jobs
	}
	t.Logf("%d workers; the serial one ran %d jobs, the remote ones %d", len(st.Workers), st.Workers[0].Jobs, remote)
	if len(st.Workers) < 2 || remote == 0 {
		t.Errorf("no remote worker ran a job (%d workers)", len(st.Workers))
	}
	exitZero(t, "worker", workers)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", strings.TrimPrefix(j.URL, "nats://"), time.Second); err == nil {
		c.Close()
		t.Error("the server's port is open after Close")
	}
	if _, err := os.Stat(joinFile); !os.IsNotExist(err) {
		t.Errorf("the join file is still there after Close: %v", err)
	}
}

// startWorkers starts n worker processes of the test binary for joinFile.
func startWorkers(t *testing.T, joinFile string, n int) []*exec.Cmd {
	t.Helper()
	return startRoles(t, envJoin+"="+joinFile, n)
}

// exitZero checks that each of cmds (named what) exits with status 0
// within 20 s of the pool's end; it kills those that do not.
func exitZero(t *testing.T, what string, cmds []*exec.Cmd) {
	t.Helper()
	for i, cmd := range cmds {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s %d: %v", what, i, err)
			}
		case <-time.After(20 * time.Second):
			// SIGQUIT first: its goroutines' stacks go to the test's log.
			cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-done
			}
			t.Errorf("%s %d did not exit within 20 s of the pool's end", what, i)
		}
	}
}

// startRoles starts n processes of the test binary with env added to
// their environment (the role they play); a cleanup kills and reaps those
// the test has not waited for.
func startRoles(t *testing.T, env string, n int) []*exec.Cmd {
	t.Helper()
	var cmds []*exec.Cmd
	for range n {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), env)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil { // not waited for by the test
				cmd.Process.Kill()
				cmd.Wait()
			}
		})
		cmds = append(cmds, cmd)
	}
	return cmds
}

// killSelf kills its remote worker the first time it runs (the file
// does not exist yet), and returns at once afterwards and in the pool's
// process.
var killSelf = engine.Register("cluster_test.killself", func(ctx context.Context, file string) (int, error) {
	if os.Getenv(envJoin) != "" {
		if f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
			f.Close()
			// At once: the result of the job this worker ran before has
			// reached the server (a worker flushes its replies), so only
			// this job dies with the worker.
			p, _ := os.FindProcess(os.Getpid())
			p.Kill()  // a remote worker dies under its job
			select {} // SIGKILL ends the process before the job returns
		}
	}
	return os.Getpid(), nil
})

// TestRemoteWorkerKilled: a remote worker that dies under a job (SIGKILL)
// is seen gone within seconds: that job is Aborted (or, here, run again
// elsewhere with Retries) and the rest completes.
func TestRemoteWorkerKilled(t *testing.T) {
	joinFile := filepath.Join(t.TempDir(), "run.join")
	l, err := listen("", joinFile)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	startWorkers(t, joinFile, 2)
	p := engine.New(engine.Workers(0), l.Option())
	gate, open := newGate(t)
	busy := engine.Queue(p, hold, gate) // the serial worker's, as the first job
	var jobs []*engine.Job[int]
	for i := range 200 {
		jobs = append(jobs, engine.Queue(p, slowSquare, i))
	}
	// Once remote workers have joined (they take jobs), one kills itself;
	// the serial worker is busy until then, so the job goes to a remote one.
	var kill *engine.Job[int]
	p.Go(func(ctx context.Context) error {
		if err := poll(ctx, "the remote workers", func() bool { return busy.Status() == engine.Running && len(p.Stats().Workers) >= 3 }); err != nil {
			return err
		}
		killed := filepath.Join(t.TempDir(), "killed")
		kill = engine.Queue(p, killSelf, killed, engine.JobRetries(1))
		err := poll(ctx, "the killing job to start", func() bool { return fileExists(killed) })
		open()
		return err
	})
	start := time.Now()
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	squaresRight(t, jobs)
	a := kill.Attempts()
	t.Logf("the killing job: %d attempts %+v; the pool took %v", len(a), a, time.Since(start))
	if len(a) != 2 || a[0].Status != engine.Aborted || !errors.Is(a[0].Err, engine.ErrWorkerDied) || a[1].Status != engine.Succeeded {
		t.Fatalf("the killing job's attempts: %+v; want one Aborted with ErrWorkerDied, then one that succeeded", a)
	}
	if d := a[0].End.Sub(a[0].Start); d > 20*time.Second {
		t.Errorf("the dead worker was seen gone %v after its job started, want within seconds", d)
	}
}

// TestOtherBuildRefused: a worker whose build is not the pool's is refused
// with a message that names both builds.
func TestOtherBuildRefused(t *testing.T) {
	joinFile := filepath.Join(t.TempDir(), "run.join")
	l, err := listen("", joinFile)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	j, err := cluster.ReadJoinFile(joinFile)
	if err != nil {
		t.Fatal(err)
	}
	p := engine.New(engine.Workers(0), l.Option())
	engine.Queue(p, slowSquare, 1)
	var answer string
	p.Go(func(ctx context.Context) error {
		nc, err := nats.Connect(j.URL, nats.Token(j.Token))
		if err != nil {
			return err
		}
		defer nc.Close()
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); { // until the pool listens
			m, err := nc.Request("poolrun.join", fmt.Appendf(nil, `{"id":"x","protocol":%d,"build":"0ther"}`, enginehost.ProtocolVersion), time.Second)
			if err == nil {
				answer = string(m.Data)
				return nil
			}
			time.Sleep(10 * time.Millisecond)
		}
		return errors.New("no answer to the join request in a minute")
	})
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(answer, "0ther") || !strings.Contains(answer, hooks.Fingerprint()) {
		t.Errorf("answer %s, want a refusal naming both builds", answer)
	}
}

// TestParentKilled: when the pool's process is killed with SIGKILL, its
// agents, whose workers were running its jobs, exit within 5 s with an
// error that says they lost the pool (status 1).
func TestParentKilled(t *testing.T) {
	joinFile := filepath.Join(t.TempDir(), "run.join")
	marksDir := t.TempDir()
	t.Setenv(envMarks, marksDir) // for the workers
	par := exec.Command(os.Args[0], "-test.run=^$")
	par.Env = append(os.Environ(), envParent+"="+joinFile)
	par.Stderr = os.Stderr
	if err := par.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { par.Process.Kill(); par.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(joinFile); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pool wrote no join file")
		}
		time.Sleep(10 * time.Millisecond)
	}
	said := []*proctest.Buffer{new(proctest.Buffer), new(proctest.Buffer)}
	ws := []*exec.Cmd{startAgent(t, joinFile, said[0]), startAgent(t, joinFile, said[1])}
	// Both join and run jobs.
	for {
		marks, _ := os.ReadDir(marksDir)
		if len(marks) == len(ws) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d workers ran a job", len(marks), len(ws))
		}
		time.Sleep(10 * time.Millisecond)
	}
	par.Process.Kill()
	par.Wait()
	killed := time.Now()
	for i, w := range ws {
		done := make(chan error, 1)
		go func() { done <- w.Wait() }()
		select {
		case err := <-done:
			t.Logf("agent %d exited %v after the pool's death: %v", i, time.Since(killed).Round(time.Millisecond), err)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(said[i].String(), "lost the pool") {
				t.Errorf("agent %d: %v, want exit status 1 saying that it lost the pool:\n%s", i, err, said[i].String())
			}
		case <-time.After(20*time.Second - time.Since(killed)):
			t.Errorf("agent %d is still there 20 s after the pool's death", i)
		}
	}
}

var bigValue = engine.Register("cluster_test.big", func(ctx context.Context, n int) ([]byte, error) {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b, nil
})

// TestLargeValues: a 20 MiB result crosses from a remote worker whole
// (frames larger than a NATS message travel in several).
func TestLargeValues(t *testing.T) {
	joinFile := filepath.Join(t.TempDir(), "run.join")
	l, err := listen("", joinFile)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	startWorkers(t, joinFile, 1)
	p := engine.New(engine.Workers(0), l.Option())
	gate, open := newGate(t)
	busy := engine.Queue(p, hold, gate) // the serial worker's
	var big *engine.Job[[]byte]
	p.Go(func(ctx context.Context) error {
		defer open()
		if err := poll(ctx, "the remote worker", func() bool { return busy.Status() == engine.Running && len(p.Stats().Workers) >= 2 }); err != nil {
			return err
		}
		big = engine.Queue(p, bigValue, 20<<20)
		return poll(ctx, "the large value", func() bool { return big.Status().Done() })
	})
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := big.Result()
	if err != nil {
		t.Fatal(err)
	}
	if big.Worker() == 1 {
		t.Fatal("the job ran on the serial worker, not a remote one")
	}
	if len(b) != 20<<20 {
		t.Fatalf("%d bytes, want %d", len(b), 20<<20)
	}
	for i, c := range b {
		if c != byte(i%251) {
			t.Fatalf("byte %d is %d", i, c)
		}
	}
}

// squaresRight fails t unless every job of jobs, queued with argument i
// (its index) to a function that squares it, returned i*i.
func squaresRight(t *testing.T, jobs []*engine.Job[int]) {
	t.Helper()
	for i, job := range jobs {
		if v, err := job.Result(); err != nil || v != i*i {
			t.Fatalf("job %d: %d, %v", i, v, err)
		}
	}
}
