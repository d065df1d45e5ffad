package test

import (
	"context"
	"testing"

	"github.com/poolrun/poolrun/engine"
)

var noop = engine.Register("test.noop", func(ctx context.Context, x int) (int, error) { return x, nil })

// BenchmarkNoopJobs runs b.N no-op jobs through a pool and reports jobs/s,
// the pool's start and stop included: serially, on 1 and 2 worker
// processes, and on 2 workers in this process (InProcess).
func BenchmarkNoopJobs(b *testing.B) {
	for _, c := range []struct {
		name string
		opt  engine.Option
	}{
		{"serial", engine.Workers(0)},
		{"workers=1", engine.Workers(1)},
		{"workers=2", engine.Workers(2)},
		{"inprocess=2", engine.InProcess(2)},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := engine.New(c.opt)
			for i := range b.N {
				engine.Queue(p, noop, i)
			}
			b.ResetTimer()
			if err := p.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
