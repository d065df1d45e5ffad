package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/scaffold"
	"github.com/poolrun/poolrun/internal/scaffoldjobs"
)

// BenchmarkPolicies runs a workload on sizes.policyWorkers workers under
// each eviction policy, side by side. One op is one whole pool run; per run
// it reports the jobs/s, the builds, hits and evictions summed over the
// workers, peak-cache-bytes (each worker's own peak, summed over the
// workers) and mean-cache-bytes (the bytes resident in the workers as they
// report them after each job, averaged over the run's time; EvictEachJob
// frees before it reports, so its items, held only while a job runs, count
// 0 there).
//
// workload=scaffold is the embedded scaffold workload at sizes.scale (and
// sizes.chunks); every policy must write the same output (checksum). Its
// rules' jobs overlap in time, so two of the three indexes are needed
// together for most of the run. workload=phases is a pipeline of sizes.policyPhases phases of
// sizes.policyPhaseJobs jobs each, phase after phase, every job of a phase
// needing that phase's block of phaseBlock bytes: the items' lifetimes do
// not overlap at all.
func BenchmarkPolicies(b *testing.B) {
	cfg := scaffoldConfig(scaffold.Default())
	checksums := map[engine.EvictPolicy]uint64{}
	for _, pol := range policies {
		b.Run("workload=scaffold/policy="+pol.String(), func(b *testing.B) {
			out := b.TempDir()
			var total runFigures
			for b.Loop() {
				p, m := newMeteredPool(pol)
				if _, err := scaffoldjobs.Queue(p, cfg, out); err != nil {
					b.Fatal(err)
				}
				total.add(runPool(b, p, m))
			}
			sum, err := scaffold.Checksum(cfg, out)
			if err != nil {
				b.Fatal(err)
			}
			checksums[pol] = sum
			for other, s := range checksums {
				if s != sum {
					b.Fatalf("checksum %016x under %v, %016x under %v", sum, pol, s, other)
				}
			}
			total.report(b)
		})
	}
	for _, pol := range policies {
		b.Run("workload=phases/policy="+pol.String(), func(b *testing.B) {
			var total runFigures
			for b.Loop() {
				p, m := newMeteredPool(pol)
				jobs := queuePhases(p)
				total.add(runPool(b, p, m))
				for i, j := range jobs {
					if v, err := j.Result(); err != nil || v != i/sizes.policyPhaseJobs {
						b.Fatalf("job %d of the phases: %d, %v", i, v, err)
					}
				}
			}
			total.report(b)
		})
	}
}

// The phased workload.
const phaseBlock = 8 << 20

// phaseBlocks are the items of the phased workload: member p is a block of
// phaseBlock bytes, every one set to p.
var phaseBlocks = cachepool.DefineFamily("bench.phase", func(ctx context.Context, p int) ([]byte, error) {
	b := make([]byte, phaseBlock)
	for i := range b {
		b[i] = byte(p)
	}
	return b, nil
}, cachepool.Size(func(b []byte) int64 { return int64(len(b)) }))

// phaseJob reads a byte of its phase's block.
var phaseJob = engine.Register("bench.phase-job", func(ctx context.Context, a [2]int) (int, error) {
	b, err := phaseBlocks.Item(a[0]).Get(ctx)
	if err != nil {
		return 0, err
	}
	return int(b[a[1]*4096%len(b)]), nil
})

// queuePhases queues the phased workload; job i belongs to phase
// i/sizes.policyPhaseJobs and returns that phase's number.
func queuePhases(p *engine.Pool) []*engine.Job[int] {
	var all, prev []*engine.Job[int]
	for ph := range sizes.policyPhases {
		var deps []engine.Dep
		for _, j := range prev {
			deps = append(deps, j)
		}
		prev = nil
		for i := range sizes.policyPhaseJobs {
			j := engine.Queue(p, phaseJob, [2]int{ph, i}, engine.Needs(phaseBlocks.Item(ph)), engine.After(deps...))
			prev = append(prev, j)
			all = append(all, j)
		}
	}
	return all
}

// runFigures are what BenchmarkPolicies reports of pool runs, summed over
// the workers (peak: each worker's own peak) and over the runs.
type runFigures struct {
	jobs                    int
	builds, hits, evictions uint64
	peak                    int64
	mean                    float64
}

func (f *runFigures) add(g runFigures) {
	f.jobs += g.jobs
	f.builds += g.builds
	f.hits += g.hits
	f.evictions += g.evictions
	f.peak += g.peak
	f.mean += g.mean
}

// report reports the figures per run.
func (f *runFigures) report(b *testing.B) {
	n := float64(b.N)
	b.ReportMetric(float64(f.jobs)/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric(float64(f.builds)/n, "builds")
	b.ReportMetric(float64(f.hits)/n, "hits")
	b.ReportMetric(float64(f.evictions)/n, "evictions")
	b.ReportMetric(float64(f.peak)/n, "peak-cache-bytes")
	b.ReportMetric(f.mean/n, "mean-cache-bytes")
}

func newMeteredPool(pol engine.EvictPolicy) (*engine.Pool, *cacheMeter) {
	m := new(cacheMeter)
	return engine.New(engine.Workers(sizes.policyWorkers), engine.Evict(pol), engine.OnEvent(m.event)), m
}

// runPool runs p and returns its figures.
func runPool(b *testing.B, p *engine.Pool, m *cacheMeter) runFigures {
	if err := p.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	var f runFigures
	st := p.Stats()
	for _, n := range st.Counts {
		f.jobs += n
	}
	tot := st.Total().Cache
	f.builds, f.hits, f.evictions, f.peak = tot.Builds, tot.Hits, tot.Evictions, tot.PeakBytes
	f.mean = m.mean()
	return f
}

// cacheMeter integrates the workers' resident cache bytes over a pool's
// run, from the events (each carries the bytes the workers last reported).
type cacheMeter struct {
	mu          sync.Mutex
	first, last time.Time
	bytes       int64   // as of last
	integral    float64 // byte-seconds
}

func (m *cacheMeter) event(e engine.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.first.IsZero() {
		m.first = e.Time
	} else {
		m.integral += float64(m.bytes) * e.Time.Sub(m.last).Seconds()
	}
	m.last, m.bytes = e.Time, e.CacheBytes
}

// mean returns the mean resident bytes between the first and last events.
func (m *cacheMeter) mean() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.last.Sub(m.first).Seconds()
	if d <= 0 {
		return 0
	}
	return m.integral / d
}
