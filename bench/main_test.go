package bench

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/scaffold"
)

// envRole makes the test binary play a part instead of running the
// benchmarks (see BenchmarkSnapshot's publisher).
const envRole = "POOLRUN_BENCH_ROLE"

func TestMain(m *testing.M) {
	engine.Init()   // first: in a worker process it serves jobs and exits
	execflow.Init() // in poolrun run's janitor: wait for its end, then exit
	switch role := os.Getenv(envRole); role {
	case "":
		flag.Parse()
		if testing.Short() {
			sizes = shortSizes
		}
		// A race-enabled program sleeps a second when it exits (the race
		// detector's atexit_sleep_ms), which every pool's end would wait for;
		// the worker processes skip it.
		if os.Getenv("GORACE") == "" {
			os.Setenv("GORACE", "atexit_sleep_ms=0")
		}
		code := m.Run()
		if builtPoolrun.dir != "" {
			os.RemoveAll(builtPoolrun.dir)
		}
		os.Exit(code)
	case "publisher":
		os.Exit(rolePublisher())
	case "poolrun":
		os.Exit(rolePoolrun())
	case "forkwait-wait", "forkwait-poll":
		os.Exit(roleForkWait(role))
	default:
		fmt.Fprintln(os.Stderr, "bench: unknown role", role)
		os.Exit(2)
	}
}

// benchSizes are the sizes the benchmarks share.
type benchSizes struct {
	// keys is the number of required keys: in the window, or in every job
	// message (BenchmarkRequiredSetTransport, BenchmarkSnapshot).
	keys []int
	// workers is the number of worker processes (BenchmarkRequiredSetTransport,
	// BenchmarkDispatch).
	workers []int
	// policyWorkers is the number of workers of BenchmarkPolicies.
	policyWorkers int
	// scale is the --scale of the scaffold workload in BenchmarkPolicies
	// and BenchmarkHold: one pool run takes a few seconds on a 2-core
	// machine.
	scale float64
	// inFlight is the number of jobs BenchmarkRequiredSetTransport keeps
	// queued or running at once.
	inFlight int
	// cerebellumScale is the --scale of examples/scaffold-cerebellum.yaml
	// in BenchmarkHold.
	cerebellumScale float64
	// chunks, if not zero, cuts the box of the scaffold workloads to this
	// many chunks along x, y and z: fewer jobs.
	chunks [3]int
	// policyPhases and policyPhaseJobs are the phases of
	// BenchmarkPolicies' phased workload and the jobs of each.
	policyPhases, policyPhaseJobs int
	// cerebellum says whether BenchmarkHold runs the workload of
	// examples/scaffold-cerebellum.yaml.
	cerebellum bool
	// holdWorkers are the worker counts of BenchmarkHold.
	holdWorkers []int
	// holdPhases and holdPhaseJobs are the phases of BenchmarkHold's
	// phased workload and the jobs of each.
	holdPhases, holdPhaseJobs int
	// forkWaitJobs is the number of jobs of `true` of one op of
	// BenchmarkForkWait, per tool.
	forkWaitJobs int
}

// sizes is the one table of sizes the benchmarks share: fullSizes, or
// shortSizes under -short.
var sizes = fullSizes

// fullSizes are the sizes of the figures in README.md.
var fullSizes = benchSizes{
	keys:          []int{10, 100, 1000},
	workers:       []int{1, 2, 4, 8},
	policyWorkers: 2,
	scale:         0.5,
	inFlight:      16,

	policyPhases:    4,
	policyPhaseJobs: 16,
	cerebellum:      true,
	cerebellumScale: 0.25,
	holdWorkers:     []int{2, 4},
	holdPhases:      6,
	holdPhaseJobs:   40,
	forkWaitJobs:    makeJobs,
}

// shortSizes are tiny sizes, with which every benchmark runs once in a
// few seconds (go test -short -bench . -benchtime 1x): enough that none
// rots, with figures that mean little.
var shortSizes = benchSizes{
	keys:          []int{100},
	workers:       []int{2},
	policyWorkers: 2,
	scale:         0.01,
	inFlight:      4,

	chunks:          [3]int{2, 1, 1},
	policyPhases:    2,
	policyPhaseJobs: 4,
	holdWorkers:     []int{2},
	holdPhases:      2,
	holdPhaseJobs:   4,
	forkWaitJobs:    20,
}

// scaffoldConfig returns cfg at sizes.scale, its box cut to sizes.chunks.
func scaffoldConfig(cfg *scaffold.Config) *scaffold.Config {
	cfg = cfg.Scaled(sizes.scale)
	for d, n := range sizes.chunks {
		if n > 0 {
			cfg.Box.Size[d] = min(cfg.Box.Size[d], float64(n)*cfg.Box.Chunk[d])
		}
	}
	return cfg
}

// policies are the engine's eviction policies, in the order of the tables.
var policies = []engine.EvictPolicy{engine.EvictStale, engine.EvictNever, engine.EvictEachJob}

// keyHandle stands for a cache item that is listed in the window but never
// built: only its key matters.
type keyHandle string

func (h keyHandle) Name() string { return string(h) }
func (h keyHandle) Key() uint64  { return cachepool.Key(string(h)) }

// residentItem is a small item that jobs get; it stays resident in every
// worker that built it, so that each eviction check has an item to judge.
var residentItem = cachepool.Define("bench.resident", func(context.Context) (*[64]byte, error) {
	return new([64]byte), nil
}, cachepool.Size(func(*[64]byte) int64 { return 64 }))

// bytesWritten returns the bytes this process has passed to write(2) so far
// (wchar in /proc/self/io): frames to the workers, in a benchmark that
// writes nothing else. ok is false where the file is missing.
func bytesWritten() (n int64, ok bool) {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, found := bytes.CutPrefix(sc.Bytes(), []byte("wchar: ")); found {
			n, err := strconv.ParseInt(string(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
