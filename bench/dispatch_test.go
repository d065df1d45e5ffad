package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/poolrun/poolrun/engine"
)

// getResident is a job that only gets an item that stays resident: every
// worker builds it once (its function declares it, so the window lists it
// while jobs remain), and every later job is a cache hit.
var getResident = engine.Register("bench.get-resident", func(ctx context.Context, i int) (int, error) {
	_, err := residentItem.Get(ctx)
	return i, err
}, engine.Uses(residentItem))

// BenchmarkDispatch runs b.N jobs queued before the pool starts through
// the pool, with 0 (serial) and sizes.workers workers, and reports jobs/s:
// the engine's whole per-job cost (dispatch, the worker's window check,
// the reply, the bookkeeping), the start and stop of the workers included.
// job=noop does nothing; job=get-resident gets a resident cache item.
func BenchmarkDispatch(b *testing.B) {
	jobs := []struct {
		name string
		fn   *engine.Func[int, int]
	}{
		{"noop", noop},
		{"get-resident", getResident},
	}
	for _, job := range jobs {
		for _, w := range append([]int{0}, sizes.workers...) {
			b.Run(fmt.Sprintf("job=%s/workers=%d", job.name, w), func(b *testing.B) {
				p := engine.New(engine.Workers(w))
				for i := range b.N {
					engine.Queue(p, job.fn, i)
				}
				b.ReportAllocs()
				b.ResetTimer()
				if err := p.Run(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
				if job.fn == getResident {
					tot := p.Stats().Total().Cache
					builds, hits := tot.Builds, tot.Hits
					if builds+hits != uint64(b.N) {
						b.Fatalf("%d builds and %d hits for %d jobs", builds, hits, b.N)
					}
				}
			})
		}
	}
}
