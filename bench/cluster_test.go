package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cluster"
	"github.com/poolrun/poolrun/engine"
)

// envJoin names the join file of the pool that the test binary, in the role
// "cluster-worker", joins as a remote worker.
const envJoin = "POOLRUN_BENCH_JOIN"

// roleClusterWorker is the test binary as a remote worker of the pool of
// the join file $POOLRUN_BENCH_JOIN: what `poolrun worker` does, once.
func roleClusterWorker() int {
	if err := cluster.Work(context.Background(), os.Getenv(envJoin)); err != nil {
		fmt.Fprintln(os.Stderr, "bench: cluster worker:", err)
		return 1
	}
	return 0
}

// waitGate reads one byte from the named pipe at path: its open blocks
// until the pipe is opened for writing, its read until a byte is there.
var waitGate = engine.Register("bench.wait-gate", func(ctx context.Context, path string) (struct{}, error) {
	f, err := os.Open(path)
	if err != nil {
		return struct{}{}, err
	}
	defer f.Close()
	_, err = io.ReadFull(f, make([]byte, 1))
	return struct{}{}, err
})

// envAgentWorkers is the number of workers of the test binary in the role
// "cluster-agent".
const envAgentWorkers = "POOLRUN_BENCH_AGENT_WORKERS"

// roleClusterAgent is the test binary as a host agent of the pool of the
// join file $POOLRUN_BENCH_JOIN, with $POOLRUN_BENCH_AGENT_WORKERS worker
// processes: what `poolrun worker -j N` does.
func roleClusterAgent() int {
	n, err := strconv.Atoi(os.Getenv(envAgentWorkers))
	if err == nil {
		err = cluster.Agent(context.Background(), os.Getenv(envJoin), n, nil, os.Stderr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: cluster agent:", err)
		return 1
	}
	return 0
}

// runPipes runs n no-op jobs on a pool of w local workers (pipes and the
// shared-memory window); see runGated for what is timed.
func runPipes(b *testing.B, w, n int) time.Duration {
	return runGated(b, engine.New(engine.Workers(w)), w, n)
}

// runCluster runs n no-op jobs on a pool with no worker of its own and w
// remote workers that join over loopback, each a process of its own
// (cluster.Work); see runAgents.
func runCluster(b *testing.B, w, n int) time.Duration {
	d, _ := runAgents(b, w, n, 0)
	return d
}

// runAgents runs n no-op jobs on a pool with no worker of its own and w
// remote workers that join over loopback: behind host agents of perAgent
// workers each (the last fewer), or, with perAgent 0, each a process with
// a connection of its own (cluster.Work). The test binary plays the
// agents or workers, started before the pool runs (they ask to join until
// the pool answers). It returns the time runGated measures and the number
// of clients of the pool's server once every worker is in. Every process
// must exit with status 0 once the pool has returned.
func runAgents(b *testing.B, w, n, perAgent int) (time.Duration, int) {
	joinFile := filepath.Join(b.TempDir(), "run.join")
	l, err := cluster.Listen("127.0.0.1:0", joinFile)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var cmds []*exec.Cmd
	for left := w; left > 0; {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		if perAgent == 0 {
			cmd.Env = append(os.Environ(), envRole+"=cluster-worker", envJoin+"="+joinFile)
			left--
		} else {
			k := min(left, perAgent)
			cmd.Env = append(os.Environ(), envRole+"=cluster-agent", envJoin+"="+joinFile, envAgentWorkers+"="+strconv.Itoa(k))
			left -= k
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	defer func() {
		for _, cmd := range cmds {
			cmd.Process.Kill() // nothing to kill once it has exited and been waited for
		}
	}()
	p := engine.New(engine.RemoteOnly(time.Minute), l.Option())
	clients := 0
	p.Go(func(ctx context.Context) error {
		for len(p.Stats().Workers) < w && ctx.Err() == nil {
			time.Sleep(time.Millisecond) // polled: no event says that a worker joined
		}
		clients = l.Clients()
		return nil
	})
	d := runGated(b, p, w, n)
	for i, cmd := range cmds {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				b.Fatalf("remote process %d: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			b.Fatalf("remote process %d still runs 10 s after the pool returned", i)
		}
	}
	return d, clients
}

// runGated runs n no-op jobs on p, behind a gate: the jobs depend on one
// job per worker that reads a byte from a named pipe, into which the gate
// writes w bytes once p has w workers (no worker polls anything
// meanwhile). It returns the time from the gate's opening to
// Run's return: the pool at work with all its workers, their starts and
// handshakes left out, their stops not. It checks that the workers
// together ran every job.
func runGated(b *testing.B, p *engine.Pool, w, n int) time.Duration {
	gatePath := filepath.Join(b.TempDir(), "gate")
	if err := syscall.Mkfifo(gatePath, 0o600); err != nil {
		b.Fatal(err)
	}
	// One gate job per worker: a pool starts workers as jobs wait for
	// them (engine.Workers), and all w must be in before the gate opens.
	var gates []engine.Dep
	for range w {
		gates = append(gates, engine.Queue(p, waitGate, gatePath))
	}
	for i := range n {
		engine.Queue(p, noop, i, engine.After(gates...))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opened := make(chan time.Time, 1)
	go func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for len(p.Stats().Workers) < w {
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
		opened <- time.Now()
		// Open for writing (once a first reader has opened), one byte for
		// each reader, held open until the pool has returned: a reader
		// that opens late finds its byte there.
		f, err := os.OpenFile(gatePath, os.O_WRONLY, 0)
		if err != nil {
			panic(err)
		}
		defer f.Close()
		if _, err := f.Write(make([]byte, w)); err != nil {
			panic(err)
		}
		<-ctx.Done()
	}()
	if err := p.Run(ctx); err != nil {
		b.Fatal(err)
	}
	end := time.Now()
	var start time.Time
	select {
	case start = <-opened:
	default:
		b.Fatalf("the pool returned before it had %d workers", w)
	}
	ran := 0
	for _, ws := range p.Stats().Workers {
		ran += ws.Jobs
	}
	if ran != n+w {
		b.Fatalf("the workers ran %d jobs of %d", ran, n+w)
	}
	return end.Sub(start)
}

// BenchmarkClusterDispatch runs b.N no-op jobs, queued before the pool
// starts, on 2 local workers over pipes and then on 2 remote workers over
// the cluster transport (loopback, the embedded NATS server), in every op,
// and reports each one's jobs/s and their ratio (cluster over pipes; below
// 1, the cluster is slower). The time runs from the moment both workers
// are in the pool to Run's return (see runGated); ns/op is the whole op,
// the starts of the workers and of the server included, per job.
func BenchmarkClusterDispatch(b *testing.B) {
	const workers = 2
	n := max(b.N, workers)
	pipes := runPipes(b, workers, n)
	clus := runCluster(b, workers, n)
	pipesRate := float64(n) / pipes.Seconds()
	clusRate := float64(n) / clus.Seconds()
	b.ReportMetric(pipesRate, "pipes-jobs/s")
	b.ReportMetric(clusRate, "cluster-jobs/s")
	b.ReportMetric(clusRate/pipesRate, "cluster/pipes")
}

// BenchmarkClusterAgents runs b.N no-op jobs on 2 to 16 remote workers
// (sizes.clusterWorkers) over loopback, each a process with a connection
// of its own (join=each) or behind host agents of 8 workers (join=agents:
// poolrun worker -j 8), in turn, and reports jobs/s and the clients of the
// pool's server once every worker is in.
func BenchmarkClusterAgents(b *testing.B) {
	for _, w := range sizes.clusterWorkers {
		for _, mode := range []struct {
			name     string
			perAgent int
		}{{"each", 0}, {"agents", 8}} {
			b.Run(fmt.Sprintf("workers=%d/join=%s", w, mode.name), func(b *testing.B) {
				n := max(b.N, w)
				d, clients := runAgents(b, w, n, mode.perAgent)
				b.ReportMetric(float64(n)/d.Seconds(), "jobs/s")
				b.ReportMetric(float64(clients), "clients")
			})
		}
	}
}

// BenchmarkClusterWorkers runs b.N no-op jobs on 1 to 16 remote workers
// (sizes.clusterWorkers) over loopback and reports jobs/s: what the cluster
// transport and the parent's one dispatch loop sustain as workers are
// added on a host with 2 cores. The latency of the window at the same
// counts is cluster's BenchmarkWindowSeen.
func BenchmarkClusterWorkers(b *testing.B) {
	for _, w := range sizes.clusterWorkers {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			d := runCluster(b, w, max(b.N, w))
			b.ReportMetric(float64(max(b.N, w))/d.Seconds(), "jobs/s")
		})
	}
}
