package clusterbench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cluster"
	"github.com/poolrun/poolrun/cluster/hub"
	"github.com/poolrun/poolrun/engine"
)

// envRole makes the test binary play a part instead of running the
// benchmarks: "cluster-agent", a host agent.
const envRole = "POOLRUN_BENCH_ROLE"

// noop does nothing.
var noop = engine.Register("clusterbench.noop", func(ctx context.Context, i int) (int, error) { return i, nil })

func TestMain(m *testing.M) {
	engine.Init() // first: in a worker process it serves jobs and exits
	switch role := os.Getenv(envRole); role {
	case "":
		// A race-enabled program sleeps a second when it exits (the race
		// detector's atexit_sleep_ms), which every pool's end would wait for;
		// the worker processes skip it.
		if os.Getenv("GORACE") == "" {
			os.Setenv("GORACE", "atexit_sleep_ms=0")
		}
		os.Exit(m.Run())
	case "cluster-agent":
		os.Exit(roleClusterAgent())
	default:
		fmt.Fprintln(os.Stderr, "clusterbench: unknown role", role)
		os.Exit(2)
	}
}

// envJoin names the join file of the pool that the test binary, in the role
// "cluster-agent", joins as a host agent.
const envJoin = "POOLRUN_BENCH_JOIN"

// waitGate reads one byte from the named pipe at path: its open blocks
// until the pipe is opened for writing, its read until a byte is there.
var waitGate = engine.Register("clusterbench.wait-gate", func(ctx context.Context, path string) (struct{}, error) {
	f, err := os.Open(path)
	if err != nil {
		return struct{}{}, err
	}
	defer f.Close()
	_, err = io.ReadFull(f, make([]byte, 1))
	return struct{}{}, err
})

// envAgentWorkers is the number of workers of the test binary in the role
// "cluster-agent", and envAgentGoroutines, if set, makes them goroutines
// (cluster.InProcess).
const (
	envAgentWorkers    = "POOLRUN_BENCH_AGENT_WORKERS"
	envAgentGoroutines = "POOLRUN_BENCH_AGENT_GOROUTINES"
)

// roleClusterAgent is the test binary as a host agent of the pool of the
// join file $POOLRUN_BENCH_JOIN, with $POOLRUN_BENCH_AGENT_WORKERS worker
// processes: what `poolrun worker -j N` does.
func roleClusterAgent() int {
	n, err := strconv.Atoi(os.Getenv(envAgentWorkers))
	var opts []cluster.AgentOption
	if os.Getenv(envAgentGoroutines) != "" {
		opts = append(opts, cluster.InProcess())
	}
	if err == nil {
		err = cluster.Agent(context.Background(), os.Getenv(envJoin), n, os.Stderr, opts...)
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

// clusterShape is how w remote workers are spread over host agents in
// the cluster benchmarks: one agent up to 8 workers, 2 up to 16, then
// agents of at most 100 workers (100: 4 of 25; 1,000: 10 of 100), as on
// hosts of many cores.
func clusterShape(w int) (agents, perAgent int) {
	switch {
	case w <= 8:
		return 1, w
	case w <= 16:
		return 2, (w + 1) / 2
	case w <= 100:
		return 4, (w + 3) / 4
	}
	agents = (w + 99) / 100
	return agents, (w + agents - 1) / agents
}

// clusterRun is what runCluster measured.
type clusterRun struct {
	d       time.Duration // see runGated
	last    time.Duration // from the gate to the last job's end
	clients int           // of the pool's server, once every worker is in
	msgs    int64         // messages the server took over d
	cpu     time.Duration // the pool's process's CPU time over d
	heap    int64         // the pool's live heap with every worker in, less before
}

// runCluster runs n no-op jobs on a pool with no worker of its own and w
// remote workers that join over loopback behind host agents of perAgent
// workers each (the last fewer), worker processes or, with goroutines,
// goroutines of the agents (cluster.InProcess): the test binary plays the
// agents (poolrun worker -j perAgent), started before the pool runs (they
// ask to join until the pool answers). Every process must exit with
// status 0 once the pool has returned.
func runCluster(b *testing.B, w, n, perAgent int, goroutines bool) clusterRun {
	joinFile := filepath.Join(b.TempDir(), "run.join")
	srv, err := hub.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	l, err := cluster.Listen(srv, joinFile)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var cmds []*exec.Cmd
	for left := w; left > 0; {
		k := min(left, perAgent)
		left -= k
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envRole+"=cluster-agent", envJoin+"="+joinFile, envAgentWorkers+"="+strconv.Itoa(k))
		if goroutines {
			cmd.Env = append(cmd.Env, envAgentGoroutines+"=1")
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
	var r clusterRun
	var cpu0 time.Duration
	var heap0, msgs0 int64
	g := runGatedHook(b, p, w, n, func() { heap0 = liveHeap() }, func() {
		r.clients = srv.Clients()
		r.heap = liveHeap() - heap0
		cpu0 = processCPU()
		msgs0 = srv.Messages()
	})
	r.d, r.last = g.end, g.last
	r.cpu = processCPU() - cpu0
	r.msgs = srv.Messages() - msgs0
	for i, cmd := range cmds {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				b.Fatalf("host agent %d: %v", i, err)
			}
		case <-time.After(30 * time.Second):
			b.Fatalf("host agent %d still runs 30 s after the pool returned", i)
		}
	}
	return r
}

// liveHeap returns the bytes of the live heap, after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// processCPU returns the CPU time (user and system) of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runGated runs n no-op jobs on p, behind a gate: the jobs depend on one
// job per worker that reads a byte from a named pipe, into which the gate
// writes w bytes once p has w workers (no worker polls anything
// meanwhile). It returns the time from the gate's opening to Run's
// return: the pool at work with all its workers, their starts and
// handshakes left out, their stops not. It checks that the workers
// together ran every job.
func runGated(b *testing.B, p *engine.Pool, w, n int) time.Duration {
	return runGatedHook(b, p, w, n, nil, nil).end
}

// gated is what runGatedHook measured from the gate's opening: to the end
// of the last of the n jobs, and to Run's return (the workers stopped).
type gated struct{ last, end time.Duration }

// runGatedHook is runGated, calling queued (if not nil) once the jobs are
// queued, before Run, and atGate (if not nil) as the gate opens; it also
// says when the last job ended.
func runGatedHook(b *testing.B, p *engine.Pool, w, n int, queued, atGate func()) gated {
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
	// The jobs wait for the gates through one job that waits for them
	// all: with each job after every gate, a pool of 1,000 workers would
	// hold a thousand edges a job, which its collector would scan.
	barrier := engine.Queue(p, noop, -1, engine.After(gates...))
	jobs := make([]*engine.Job[int], n)
	for i := range n {
		jobs[i] = engine.Queue(p, noop, i, engine.After(barrier))
	}
	if queued != nil {
		queued()
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
		if atGate != nil {
			atGate()
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
	if ran != n+w+1 {
		b.Fatalf("the workers ran %d jobs of %d", ran, n+w+1)
	}
	var last time.Time
	for _, j := range jobs {
		if _, _, ended := j.Times(); ended.After(last) {
			last = ended
		}
	}
	return gated{last: last.Sub(start), end: end.Sub(start)}
}

// BenchmarkClusterDispatch runs b.N no-op jobs, queued before the pool
// starts, on 2 local workers over pipes and then on 2 remote workers over
// the cluster transport (one host agent, loopback, the embedded NATS
// server), in every op, and reports each one's jobs/s and their ratio
// (cluster over pipes; below 1, the cluster is slower). The time runs from
// the moment both workers are in the pool to Run's return (see runGated);
// ns/op is the whole op, the starts of the workers and of the server
// included, per job.
func BenchmarkClusterDispatch(b *testing.B) {
	const workers = 2
	n := max(b.N, workers)
	pipes := runPipes(b, workers, n)
	clus := runCluster(b, workers, n, workers, false).d
	pipesRate := float64(n) / pipes.Seconds()
	clusRate := float64(n) / clus.Seconds()
	b.ReportMetric(pipesRate, "pipes-jobs/s")
	b.ReportMetric(clusRate, "cluster-jobs/s")
	b.ReportMetric(clusRate/pipesRate, "cluster/pipes")
}

// clusterWorkers returns the counts of remote workers of
// BenchmarkClusterWorkers: 2 alone under -short.
func clusterWorkers() []int {
	if testing.Short() {
		return []int{2}
	}
	return []int{2, 16, 100, 1000}
}

// BenchmarkClusterWorkers runs b.N no-op jobs on 2 to 1,000 remote workers
// (clusterWorkers) behind host agents (clusterShape), over loopback,
// on this one machine: worker processes (workers-are=processes), and
// goroutines of the agents (workers-are=goroutines, cluster.InProcess),
// in turn. It reports: jobs/s, from the gate's opening to the last job's
// end, and the stop that follows apart (stop-ms: from the last job's end
// to Run's return, every worker told to stop and its goodbye heard, a
// fixed cost that would otherwise weigh on the rate of short runs of many
// workers); the clients of the pool's server once every
// worker is in (one per agent, and the pool's); the pool's CPU time per
// job (pool-cpu-µs/job); the pool's live heap per worker with every
// worker in (pool-KiB/worker); and the messages the server took per job,
// both ways (msgs/job: below 1 where the hosts' streams batch). What the cluster transport and the pool's
// one dispatch loop sustain as workers are added; on 2 cores, 1,000 worker
// processes and their agents share the machine with the pool, which the
// goroutine workers leave to it.
func BenchmarkClusterWorkers(b *testing.B) {
	for _, w := range clusterWorkers() {
		agents, perAgent := clusterShape(w)
		for _, mode := range []string{"processes", "goroutines"} {
			b.Run(fmt.Sprintf("workers=%d/agents=%d/workers-are=%s", w, agents, mode), func(b *testing.B) {
				n := max(b.N, w)
				r := runCluster(b, w, n, perAgent, mode == "goroutines")
				b.ReportMetric(float64(n)/r.last.Seconds(), "jobs/s")
				b.ReportMetric(float64((r.d-r.last).Microseconds())/1000, "stop-ms")
				b.ReportMetric(float64(r.clients), "clients")
				b.ReportMetric(float64(r.cpu.Microseconds())/float64(n), "pool-cpu-µs/job")
				b.ReportMetric(float64(r.heap)/1024/float64(w), "pool-KiB/worker")
				b.ReportMetric(float64(r.msgs)/float64(n), "msgs/job")
			})
		}
	}
}
