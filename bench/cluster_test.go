package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// runPipes runs n no-op jobs on a pool of w local workers (pipes and the
// shared-memory window); see runGated for what is timed.
func runPipes(b *testing.B, w, n int) time.Duration {
	return runGated(b, engine.New(engine.Workers(w)), w, n)
}

// runCluster runs n no-op jobs on a pool with no worker of its own and w
// remote workers that join over loopback (the test binary, started before
// the pool runs, asks to join until the pool answers); see runGated for
// what is timed. Every worker must exit with status 0 once the pool has
// returned.
func runCluster(b *testing.B, w, n int) time.Duration {
	joinFile := filepath.Join(b.TempDir(), "run.join")
	l, err := cluster.Listen("127.0.0.1:0", joinFile)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	cmds := make([]*exec.Cmd, w)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envRole+"=cluster-worker", envJoin+"="+joinFile)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		cmds[i] = cmd
	}
	defer func() {
		for _, cmd := range cmds {
			cmd.Process.Kill() // nothing to kill once it has exited and been waited for
		}
	}()
	d := runGated(b, engine.New(engine.RemoteOnly(time.Minute), l.Option()), w, n)
	for i, cmd := range cmds {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				b.Fatalf("remote worker %d: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			b.Fatalf("remote worker %d still runs 10 s after the pool returned", i)
		}
	}
	return d
}

// runGated runs n no-op jobs on p, behind a gate: the jobs depend on one
// job that waits for a file, which is made once p has w workers. It returns
// the time from the gate's opening to Run's return: the pool at work with
// all its workers, their starts and handshakes left out, their stops not.
// It checks that the workers together ran every job.
func runGated(b *testing.B, p *engine.Pool, w, n int) time.Duration {
	gatePath := filepath.Join(b.TempDir(), "gate")
	// One gate job per worker: a pool starts workers as jobs wait for
	// them (engine.Workers), and all w must be in before the gate opens.
	var gates []engine.Dep
	for range w {
		gates = append(gates, engine.Queue(p, waitFile, gatePath))
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
		if err := os.WriteFile(gatePath, nil, 0o644); err != nil {
			panic(err)
		}
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
