package test

import (
	"context"
	"fmt"
	"testing"

	"github.com/poolrun/poolrun/engine"
)

var noop = engine.Register("test.noop", func(ctx context.Context, x int) (int, error) { return x, nil })

// BenchmarkNoopJobs runs b.N no-op jobs through a pool and reports jobs/s,
// the pool's start and stop included.
func BenchmarkNoopJobs(b *testing.B) {
	for _, w := range []int{0, 1, 2} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			p := engine.New(engine.Workers(w))
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
