package scaffold

import (
	"fmt"
	"testing"
	"time"
)

// scales returns the table of workload sizes the benchmarks share, as
// factors of the default configuration's volume (scaffold.Config.Scaled):
// under -short a tiny one alone.
func scales() []float64 {
	if testing.Short() {
		return []float64{0.01}
	}
	return []float64{0.1, 1, 2}
}

// BenchmarkWorkload runs the whole default workload serially, each index built
// once, and reports what sizes it: the time to place every cell type, to build
// each index, the index memory, and the mean time of a connectivity job per
// rule. Run it with -benchtime 1x and -v to see the figures:
//
//	go test -run '^$' -bench Workload -benchtime 1x ./internal/scaffold/
func BenchmarkWorkload(b *testing.B) {
	for _, f := range scales() {
		b.Run(fmt.Sprintf("scale=%g", f), func(b *testing.B) {
			cfg := Default().Scaled(f)
			dir := b.TempDir()
			var st runStats
			for b.Loop() {
				st = runAll(b, cfg, dir, nil)
			}
			b.ReportMetric(float64(st.place.Milliseconds()), "place-ms")
			b.ReportMetric(float64(st.placeJobs), "place-jobs")
			for typ, d := range st.index {
				b.ReportMetric(float64(d.Milliseconds()), "index-"+typ+"-ms")
				b.ReportMetric(float64(st.indexBytes[typ])/(1<<20), "index-"+typ+"-MiB")
			}
			var connect time.Duration
			for rule, d := range st.connect {
				connect += d
				b.ReportMetric(float64(d.Milliseconds())/float64(st.connJobs[rule]), "connect-"+rule+"-ms/job")
				b.Logf("%-24s %4d jobs %10d connections %8.0f ms", rule, st.connJobs[rule], st.conns[rule], float64(d.Milliseconds()))
			}
			for _, t := range cfg.CellTypes {
				n, _ := cfg.cells(t.Name)
				b.Logf("%-24s %10d cells", t.Name, n)
			}
			var build time.Duration
			for typ, d := range st.index {
				build += d
				b.Logf("index %-18s %10d cells %8.1f MiB %6d ms", typ, st.indexCells[typ], float64(st.indexBytes[typ])/(1<<20), d.Milliseconds())
			}
			b.Logf("place %d ms, indexes %d ms, connect %d ms: serial total %d ms",
				st.place.Milliseconds(), build.Milliseconds(), connect.Milliseconds(), (st.place + build + connect).Milliseconds())
		})
	}
}
