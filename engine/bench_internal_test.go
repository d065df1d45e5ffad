package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/poolrun/poolrun/cachepool"
)

var benchFn = Register("engine.bench", func(ctx context.Context, x int) (int, error) { return x, nil })

// benchSizes are the pool sizes of the required-set benchmarks; under
// -short the smallest alone.
func benchSizes() []int {
	if testing.Short() {
		return []int{1_000}
	}
	return []int{1_000, 10_000, 100_000}
}

// handle is a cache item stand-in: only names and keys matter here.
type handle string

func (h handle) Name() string { return string(h) }
func (h handle) Key() uint64  { return cachepool.Key(string(h)) }

// fillPool queues n jobs, each needing 2 of 200 items.
func fillPool(n int) *Pool {
	p := New(Workers(0))
	for i := range n {
		Queue(p, benchFn, i, Needs(handle(fmt.Sprint("item", i%200)), handle(fmt.Sprint("item", (i*7+3)%200))))
	}
	return p
}

// requiredByRescan is the BSB way: after every completion, walk every job
// that has not finished and collect the items they need.
func requiredByRescan(p *Pool, dst []uint64) []uint64 {
	seen := make(map[uint64]struct{})
	dst = dst[:0]
	for _, j := range p.jobs {
		if j.Status().Done() {
			continue
		}
		for _, k := range j.keys {
			if _, ok := seen[k]; !ok {
				seen[k] = struct{}{}
				dst = append(dst, k)
			}
		}
	}
	return dst
}

// BenchmarkRequiredSet measures the cost of one job's completion, the
// update of the required set included, with n jobs in the pool: the
// engine's per-key reference counts against a full rescan.
func BenchmarkRequiredSet(b *testing.B) {
	for _, n := range benchSizes() {
		for _, way := range []string{"refcount", "rescan"} {
			b.Run(fmt.Sprintf("jobs=%d/%s", n, way), func(b *testing.B) {
				p := fillPool(n)
				next := 0
				var keys []uint64
				b.ReportAllocs()
				for b.Loop() {
					if next == n {
						b.StopTimer()
						p, next = fillPool(n), 0
						b.StartTimer()
					}
					p.mu.Lock()
					j := p.jobs[next]
					next++
					p.finish(j, Succeeded, nil)
					switch way {
					case "refcount":
						if p.refs.changed {
							keys = appendKeys(keys[:0], p.refs.n)
							p.refs.changed = false
						}
					case "rescan":
						keys = requiredByRescan(p, keys)
					}
					p.mu.Unlock()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/completion")
			})
		}
	}
}
