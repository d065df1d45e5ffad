package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/scaffold"
	"github.com/poolrun/poolrun/internal/scaffoldjobs"
)

// holdMode is one way of running a pool that BenchmarkHold compares: the
// plain engine (the pool-wide rule and first-come dispatch), each of the
// features that hold less and build less on its own and all together,
// never and each-job, and all together with a budget of half of what a
// worker held at most under never.
type holdMode struct {
	name   string
	opts   []engine.Option
	budget bool // CacheBudget(half of never's largest worker peak)
}

var holdModes = []holdMode{
	{"plain", []engine.Option{engine.Evict(engine.EvictPoolWide), engine.Affinity(false), engine.IdleEviction(false)}, false},
	{"per-worker", []engine.Option{engine.Evict(engine.EvictStale), engine.Affinity(false), engine.IdleEviction(false)}, false},
	{"affinity", []engine.Option{engine.Evict(engine.EvictStale), engine.Affinity(true), engine.IdleEviction(false)}, false},
	{"idle", []engine.Option{engine.Evict(engine.EvictStale), engine.Affinity(false), engine.IdleEviction(true)}, false},
	{"all", []engine.Option{engine.Evict(engine.EvictStale), engine.Affinity(true), engine.IdleEviction(true)}, false},
	{"never", []engine.Option{engine.Evict(engine.EvictNever), engine.Affinity(false)}, false},
	{"each-job", []engine.Option{engine.Evict(engine.EvictEachJob), engine.Affinity(false)}, false},
	{"budget", []engine.Option{engine.Evict(engine.EvictStale), engine.Affinity(true), engine.IdleEviction(true)}, true},
}

// holdWorkload queues a workload on p and, after Run, checks its results.
type holdWorkload struct {
	name  string
	queue func(b *testing.B, p *engine.Pool) (check func())
}

// BenchmarkHold runs each workload under each mode, at each of
// sizes.holdWorkers workers, side by side. One op is one pool run. Per run it reports: builds (items
// built, over the workers), sum-peak-MiB (each worker's own cache peak,
// summed), peak-MiB (the peak over time of the workers' summed cache: what
// the host needs), stale-MiB-s (the integral over time of the bytes held
// in items no unfinished job needs), rss-over-cache-MiB (the largest
// amount by which a worker's peak RSS exceeded its cache peak) and the wall
// time (sec/op).
//
// Workloads: scaffold, the embedded scaffold at sizes.scale (and
// sizes.chunks); cerebellum, examples/scaffold-cerebellum.yaml at
// sizes.cerebellumScale, if sizes.cerebellum (under -short it is only
// parsed: it runs the scaffold's code with more chunks); phased,
// sizes.holdPhases phases of one 64 MiB item built in 300 ms,
// sizes.holdPhaseJobs jobs of 2 ms each per phase, all queued at once
// (the workload on which Dask beat the plain engine). each-job is left out
// of phased: it builds an item of 300 ms per job.
func BenchmarkHold(b *testing.B) {
	workloads := []holdWorkload{
		{"scaffold", scaffoldWorkload(scaffoldConfig(scaffold.Default()))},
		{"phased", queueHoldPhases},
	}
	path := filepath.Join("..", "examples", "scaffold-cerebellum.yaml")
	if data, err := os.ReadFile(path); err == nil {
		cfg, err := scaffold.ParseConfig(path, data)
		if err != nil {
			b.Fatal(err)
		}
		if sizes.cerebellum {
			workloads = append(workloads[:1], append([]holdWorkload{{"cerebellum", scaffoldWorkload(cfg.Scaled(sizes.cerebellumScale))}}, workloads[1:]...)...)
		}
	} else if !os.IsNotExist(err) {
		b.Fatal(err)
	}
	for _, w := range workloads {
		for _, workers := range sizes.holdWorkers {
			var neverPeak int64
			// never runs before budget, which needs its peak.
			for _, m := range holdModes {
				if w.name == "phased" && m.name == "each-job" {
					continue // a build of 300 ms per job, and nothing to learn
				}
				b.Run(fmt.Sprintf("workload=%s/workers=%d/mode=%s", w.name, workers, m.name), func(b *testing.B) {
					opts := append([]engine.Option{engine.Workers(workers)}, m.opts...)
					if m.budget {
						if neverPeak == 0 {
							b.Skip("needs never's peak: run the never mode first")
						}
						opts = append(opts, engine.CacheBudget(neverPeak/2))
					}
					var f holdFigures
					for b.Loop() {
						p := engine.New(opts...)
						check := w.queue(b, p)
						if err := p.Run(context.Background()); err != nil {
							b.Fatal(err)
						}
						check()
						f.add(p.Stats())
					}
					if m.name == "never" {
						neverPeak = f.maxWorkerPeak
					}
					f.report(b)
				})
			}
		}
	}
}

// holdFigures sums BenchmarkHold's figures over runs.
type holdFigures struct {
	runs                   int
	builds                 uint64
	sumPeak, peak          int64
	stale                  float64
	rssOver, maxWorkerPeak int64
}

func (f *holdFigures) add(st engine.Stats) {
	f.runs++
	tot := st.Total()
	f.builds += tot.Cache.Builds
	f.sumPeak += tot.Cache.PeakBytes
	f.peak += st.PeakCacheBytes
	f.stale += st.StaleByteSeconds
	for _, w := range st.Workers {
		f.maxWorkerPeak = max(f.maxWorkerPeak, w.Cache.PeakBytes)
		if w.PeakRSS > 0 {
			f.rssOver = max(f.rssOver, w.PeakRSS-w.Cache.PeakBytes)
		}
	}
}

func (f *holdFigures) report(b *testing.B) {
	n := float64(f.runs)
	const mib = 1 << 20
	b.ReportMetric(float64(f.builds)/n, "builds")
	b.ReportMetric(float64(f.sumPeak)/n/mib, "sum-peak-MiB")
	b.ReportMetric(float64(f.peak)/n/mib, "peak-MiB")
	b.ReportMetric(f.stale/n/mib, "stale-MiB-s")
	b.ReportMetric(float64(f.rssOver)/mib, "rss-over-cache-MiB")
}

// scaffoldWorkload queues the scaffold workload of cfg; the check compares
// the output's checksum with the first run's.
func scaffoldWorkload(cfg *scaffold.Config) func(b *testing.B, p *engine.Pool) func() {
	var want uint64
	return func(b *testing.B, p *engine.Pool) func() {
		out := b.TempDir()
		plan, err := scaffoldjobs.Queue(p, cfg, out)
		if err != nil {
			b.Fatal(err)
		}
		return func() {
			plan.Close()
			sum, err := scaffold.Checksum(cfg, out)
			if err != nil {
				b.Fatal(err)
			}
			if want == 0 {
				want = sum
			} else if sum != want {
				b.Fatalf("checksum %016x, another mode wrote %016x", sum, want)
			}
		}
	}
}

// The phased workload of issue 10 (the one Dask won).
// Its phases and their jobs are in sizes.
const (
	holdItemBytes = 64 << 20
	holdBuild     = 300 * time.Millisecond
	holdJob       = 2 * time.Millisecond
)

// holdItems are the phased workload's items: member p is holdItemBytes
// bytes, every page written (so that it is resident), built in holdBuild.
var holdItems = cachepool.DefineFamily("bench.hold", func(ctx context.Context, p int) ([]byte, error) {
	start := time.Now()
	b := make([]byte, holdItemBytes)
	for i := 0; i < len(b); i += 4096 {
		b[i] = byte(p)
	}
	time.Sleep(holdBuild - time.Since(start))
	return b, nil
}, cachepool.Size(func(b []byte) int64 { return int64(len(b)) }))

// holdJobFn reads its phase's item for holdJob and returns the phase.
var holdJobFn = engine.Register("bench.hold-job", func(ctx context.Context, a [2]int) (int, error) {
	b, err := holdItems.Item(a[0]).Get(ctx)
	if err != nil {
		return 0, err
	}
	sum := 0
	for deadline := time.Now().Add(holdJob); time.Now().Before(deadline); {
		for i := 0; i < 1<<14; i += 4096 {
			sum += int(b[(a[1]<<14+i)%len(b)])
		}
	}
	return sum*0 + a[0], nil
})

// queueHoldPhases queues the phased workload, every job at once.
func queueHoldPhases(b *testing.B, p *engine.Pool) func() {
	var jobs []*engine.Job[int]
	for ph := range sizes.holdPhases {
		for i := range sizes.holdPhaseJobs {
			jobs = append(jobs, engine.Queue(p, holdJobFn, [2]int{ph, i}, engine.Needs(holdItems.Item(ph))))
		}
	}
	return func() {
		for i, j := range jobs {
			if v, err := j.Result(); err != nil || v != i/sizes.holdPhaseJobs {
				b.Fatalf("job %d of the phases: %d, %v", i, v, err)
			}
		}
	}
}
