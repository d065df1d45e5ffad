package test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cluster"
	"github.com/poolrun/poolrun/cluster/hub"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/proctest"
)

// The transports the integration tests run over. A test that makes sense
// whatever carries the jobs runs under [modes]: pipes (local worker
// processes and the shared-memory window), serial (in the test's own
// process) and the cluster (worker processes of the test binary that join
// the pool's embedded NATS server over loopback, with a join file, the way
// workers on other hosts do; the pool starts no worker of its own).
//
// What does not make sense across hosts stays on the local transports, and
// says why where it is tested:
//
//   - anything that needs the pool to start, restart or kill worker
//     processes it owns: their process ids and the death of the pool's
//     process (kill_test.go), start-up stalls and crashes (places_test.go,
//     main_test.go's envStallOnce and envDie*), retries after a worker is
//     killed and restarts after a job that ignores its cancel
//     (faults_test.go). A remote worker is not the pool's to start or
//     restart; its death is tested in package cluster
//     (TestRemoteWorkerKilled, TestParentKilled);
//   - the workers' standard output and error (output_test.go): a remote
//     worker's output stays on its own host, in its own terminal or log,
//     and is not carried back to the pool's WorkerOutput writers;
//   - tests whose timing needs every worker there from the start, which
//     remote workers are not (they join while the pool runs): taking a job
//     back from a busy worker (revoke_test.go), affinity's bound and idle
//     eviction (hold_test.go), the two-worker policy model
//     (policy_test.go), the soak test.
//
// The cluster's own failure cases (a remote worker killed, a wrong
// credential, another build, the pool's process killed, a window that
// reaches a worker late) are tested in package cluster, whose test binary
// re-executes itself as remote workers the same way.

// A transport is how a test's pool reaches its workers.
type transport struct {
	name    string
	workers int // local worker processes; 0 without remote ones: serial
	// remote worker processes join over the cluster, behind host agents
	// of up to agentWorkers each (the test binary, as poolrun worker).
	remote int
}

// agentWorkers is how many worker processes a test's host agent runs.
const agentWorkers = 2

var (
	pipesTransport   = transport{name: "pipes", workers: 2}
	serialTransport  = transport{name: "serial"}
	clusterTransport = transport{name: "cluster", remote: 4}
)

// modes runs f over the three transports: 2 local worker processes on
// pipes, serially, and 4 remote worker processes over the cluster, behind
// 2 host agents.
func modes(t *testing.T, f func(t *testing.T, tr transport)) {
	for _, tr := range []transport{pipesTransport, serialTransport, clusterTransport} {
		t.Run(tr.name, func(t *testing.T) { f(t, tr) })
	}
}

// localModes runs f with 2 local worker processes on pipes and serially:
// for tests that do not make sense across hosts (the caller says why).
func localModes(t *testing.T, f func(t *testing.T, tr transport)) {
	for _, tr := range []transport{pipesTransport, serialTransport} {
		t.Run(tr.name, func(t *testing.T) { f(t, tr) })
	}
}

// New makes a pool with opts over tr. Over the cluster, it also starts
// the pool's server (its join file in a temporary folder of t) and tr's
// remote worker processes, which inherit the test's environment as it is
// now; when t ends, the server is closed (after Run has returned) and
// every worker must have exited within 5 s.
func (tr transport) New(t *testing.T, opts ...engine.Option) *engine.Pool {
	t.Helper()
	if tr.remote == 0 {
		return engine.New(append([]engine.Option{engine.Workers(tr.workers)}, opts...)...)
	}
	joinFile := filepath.Join(t.TempDir(), "run.join")
	srv, err := hub.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := cluster.Listen(srv, joinFile)
	if err != nil {
		t.Fatal(err)
	}
	j, err := cluster.ReadJoinFile(joinFile)
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	ws := startRemoteWorkers(t, joinFile, tr.remote)
	var p *engine.Pool
	var mu sync.Mutex
	joined := map[int]bool{} // the agents whose workers served the pool
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("closing the pool's server: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		ws.wait(t, 5*time.Second, joined)
		addr := strings.TrimPrefix(j.URL, "nats://")
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("the pool's server still listens on %s after Close", addr)
		}
	})
	o := []engine.Option{engine.Workers(tr.workers), l.Option()}
	if tr.workers == 0 {
		o = append(o, engine.RemoteOnly(time.Minute))
	}
	p = engine.New(append(o, opts...)...)
	// The pool does not end before all of tr's workers are in: each of
	// them serves it, and must leave it cleanly. (Without this, a worker
	// that started late would find the pool gone as it joined.)
	p.Go(func(ctx context.Context) error {
		deadline := time.Now().Add(joinWithin)
		for {
			n := 0
			for _, w := range p.Stats().Workers {
				if w.PID != 0 {
					n++
					mu.Lock()
					joined[proctest.ParentOf(w.PID)] = true
					mu.Unlock()
				}
			}
			if n >= tr.remote {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d remote workers joined within %v", n, tr.remote, joinWithin)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	return p
}

// joinWithin is how long a cluster pool waits for all its remote workers
// to join before it fails.
const joinWithin = 30 * time.Second

// envJoin makes the test binary a host agent of the pool whose join file
// it names (cluster.Agent), and envAgentWorkers says of how many workers.
const (
	envJoin         = "POOLRUN_TEST_JOIN"
	envAgentWorkers = "POOLRUN_TEST_AGENT_WORKERS"
)

// roleRemoteWorker serves the pool of the join file named by envJoin, as
// a host agent.
func roleRemoteWorker() int {
	n, err := strconv.Atoi(os.Getenv(envAgentWorkers))
	if err == nil {
		err = cluster.Agent(context.Background(), os.Getenv(envJoin), n, os.Stderr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "test host agent:", err)
		return 1
	}
	return 0
}

// remoteWorkers are worker processes started for one pool.
type remoteWorkers struct {
	cmds   []*exec.Cmd
	stderr []*proctest.Buffer
	done   []chan error
}

// startRemoteWorkers starts host agents of the test binary, with n
// workers in all (agentWorkers each, the last fewer), that join the pool
// of joinFile. A cleanup of t kills and reaps any still running, so that
// no process outlives the test.
func startRemoteWorkers(t *testing.T, joinFile string, n int) *remoteWorkers {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ws := &remoteWorkers{}
	for left := n; left > 0; left -= agentWorkers {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), envRole+"=remote-worker", envJoin+"="+joinFile,
			envAgentWorkers+"="+strconv.Itoa(min(left, agentWorkers)))
		stderr := &proctest.Buffer{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		ws.cmds, ws.stderr, ws.done = append(ws.cmds, cmd), append(ws.stderr, stderr), append(ws.done, done)
	}
	// Registered before the caller's cleanup that closes the server, so
	// it runs after it: nothing is left to kill if that one worked.
	t.Cleanup(func() {
		for i, cmd := range ws.cmds {
			cmd.Process.Kill() // no-op for a process already reaped
			<-ws.done[i]
			ws.done[i] <- nil // wait may ask again
		}
	})
	return ws
}

// wait waits up to within for every agent to exit once the pool's server
// is closed, then kills the rest. An agent whose workers served the pool
// (its process id is in joined) must have exited 0.
func (ws *remoteWorkers) wait(t *testing.T, within time.Duration, joined map[int]bool) {
	t.Helper()
	deadline := time.After(within)
	for i, cmd := range ws.cmds {
		var err error
		select {
		case err = <-ws.done[i]:
			ws.done[i] <- err
		case <-deadline:
			cmd.Process.Kill()
			err = <-ws.done[i]
			ws.done[i] <- err
			t.Errorf("host agent %d (pid %d) had not exited %v after the pool's server closed", i, cmd.Process.Pid, within)
			continue
		}
		switch {
		case !joined[cmd.Process.Pid]:
			// Only when the pool stopped taking jobs early (fail-fast,
			// a cancelled context) before this one was in.
			t.Logf("host agent %d (pid %d) did not get into the pool before it ended: exit %v\n%s", i, cmd.Process.Pid, err, ws.stderr[i])
		case err != nil:
			t.Errorf("host agent %d (pid %d), whose workers served the pool: %v\n%s", i, cmd.Process.Pid, err, ws.stderr[i])
		}
	}
}

// TestClusterNoLeak runs cluster pools one after another: once each has
// run and its server is closed, no goroutine of it is left, its port is
// closed and its worker processes have exited (the cleanups of
// transport.New check those two).
func TestClusterNoLeak(t *testing.T) {
	run := func(name string) {
		t.Run(name, func(t *testing.T) {
			p := clusterTransport.New(t, engine.OnEvent(func(engine.Event) {}), engine.Tick(time.Millisecond))
			for i := range 20 {
				engine.Queue(p, square, i)
			}
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
	run("warm-up") // what the runtime and the NATS client start once
	before := runtime.NumGoroutine()
	for i := range 3 {
		run(fmt.Sprint("pool ", i+1))
	}
	deadline := time.Now().Add(20 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines before, %d after three cluster pools:\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}
