package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/shm"
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

// BenchmarkWorkerWindowCheck measures a worker's whole per-job window work:
// take a snapshot when the generation moved, then decide which of its
// resident items to evict (none are, here: they are all still required).
func BenchmarkWorkerWindowCheck(b *testing.B) {
	for _, moved := range []bool{false, true} {
		name := "unchanged"
		if moved {
			name = "generation-moved"
		}
		b.Run(name, func(b *testing.B) {
			// Two windows of 1000 keys at different generations, which the
			// worker reads in turn when "moved", so that every check takes a
			// new snapshot; the resident items are required in both.
			var readers [2]*shm.Window
			for w := range readers {
				win, err := shm.Create(shm.DefaultCapacity)
				if err != nil {
					b.Fatal(err)
				}
				defer win.Close()
				var keys []uint64
				for i := range 1000 {
					keys = append(keys, cachepool.Key(fmt.Sprint("item", i)))
				}
				for g := 0; g <= w; g++ {
					keys[999] = uint64(g + 1) // another set, another generation
					win.Publish(keys)
				}
				if readers[w], err = shm.Open(win.File()); err != nil {
					b.Fatal(err)
				}
				defer readers[w].Close()
			}
			cache := cachepool.New()
			ctx := cachepool.WithCache(context.Background(), cache)
			for i := 1; i <= 5; i++ {
				if _, err := benchItems[i].Get(ctx); err != nil {
					b.Fatal(err)
				}
			}
			views := [2]windowReader{shmReader{readers[0]}, shmReader{readers[1]}}
			r := &runner{win: views[0], cache: cache}
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				if moved {
					i++
					r.win = views[i&1]
				}
				n, err := r.sync(0)
				if err != nil || n != 0 {
					b.Fatalf("sync: %d evicted, %v", n, err)
				}
			}
			if got := cache.Stats().Resident; got != 5 {
				b.Fatalf("%d resident, want 5", got)
			}
		})
	}
}

// benchItems are items 0..5 named like the keys of the window benchmark.
var benchItems = func() []*cachepool.Item[int] {
	var its []*cachepool.Item[int]
	for i := range 6 {
		its = append(its, cachepool.Define(fmt.Sprint("item", i), func(context.Context) (int, error) { return i, nil }))
	}
	return its
}()
