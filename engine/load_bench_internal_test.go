//go:build linux

package engine

import (
	"fmt"
	"math"
	"reflect"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"golang.org/x/sys/unix"
)

// The parent's side of a large graph: what a queued job costs in memory,
// and what dependency handling costs per job as graphs grow.

// loadJobs is the size of the graph of BenchmarkQueuedJobMemory (issue 11:
// a graph of 100,000 queued jobs costs the parent less than 1 KiB per job).
const loadJobs = 100_000

// heapAfterGC returns the live heap after a full collection.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC() // a second cycle frees what the first one's finalisers released
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// queueLoad queues n small jobs into p, as a program building a large graph
// does: an int argument, one item (every third job two) out of 200, and
// every fourth job after two earlier ones. It returns the jobs' handles.
func queueLoad(p *Pool, n int, items []cachepool.Handle) []*Job[int] {
	jobs := make([]*Job[int], n)
	opts := make([]JobOption, 0, 3)
	for i := range n {
		opts = append(opts[:0], Needs(items[i%len(items)]))
		if i%3 == 0 {
			opts = append(opts, Needs(items[(i*7+1)%len(items)]))
		}
		if i%4 == 3 {
			opts = append(opts, After(jobs[i-1], jobs[i/2]))
		}
		jobs[i] = Queue(p, benchFn, i, opts...)
	}
	return jobs
}

// BenchmarkQueuedJobMemory queues a graph of 100,000 small jobs into a pool
// (not run) and reports the heap it retains, with the pool and the jobs'
// handles still referenced, per job ("B/job"; the bound is 1024),
// and the size of the job record itself ("record-B").
func BenchmarkQueuedJobMemory(b *testing.B) {
	items := make([]cachepool.Handle, 200)
	for i := range items {
		items[i] = handle(fmt.Sprint("load.item", i))
	}
	var perJob float64
	for b.Loop() {
		before := heapAfterGC()
		p := New(Workers(2))
		jobs := queueLoad(p, loadJobs, items)
		after := heapAfterGC()
		if got := p.counts[Pending] + p.counts[Queued]; got != loadJobs {
			b.Fatalf("%d jobs pending or queued, want %d", got, loadJobs)
		}
		runtime.KeepAlive(p)
		runtime.KeepAlive(jobs)
		perJob = (float64(after) - float64(before)) / loadJobs
	}
	b.ReportMetric(perJob, "B/job")
	b.ReportMetric(float64(reflect.TypeFor[job]().Size()), "record-B")
}

// depSizes are the two graph sizes whose per-job costs
// BenchmarkDependencies compares; the larger is a multiple of the smaller.
var depSizes = [2]int{5_000, 50_000}

// depShapes are the graphs of BenchmarkDependencies, built on n jobs.
var depShapes = []struct {
	name  string
	build func(p *Pool, n int) *Job[int] // returns the job that ends last
}{
	{"chain", func(p *Pool, n int) *Job[int] {
		// Each job after the one before it.
		j := Queue(p, benchFn, 0)
		for i := 1; i < n; i++ {
			j = Queue(p, benchFn, i, After(j))
		}
		return j
	}},
	{"fan-in", func(p *Pool, n int) *Job[int] {
		// One job after all the others.
		deps := make([]Dep, n-1)
		for i := range deps {
			deps[i] = Queue(p, benchFn, i)
		}
		return Queue(p, benchFn, n, After(deps...))
	}},
}

// runGraph runs every job of p as the scheduler does, without workers: it
// takes the oldest ready job, marks it Running and finishes it Succeeded,
// which releases its dependents. It returns the number of jobs run.
func runGraph(p *Pool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for j := p.queue.peek(); j != nil; j = p.queue.peek() {
		p.queue.pop()
		if j.Status() != Queued {
			continue
		}
		p.setStatus(j, Running)
		p.finish(j, Succeeded, nil)
		n++
	}
	return n
}

// threadTime returns the CPU time the calling thread has used, in user and
// system mode: the work done, without the time other processes of a busy
// machine took from it, nor the runtime's own threads' (the scavenger's).
// The caller has locked its goroutine to its thread.
func threadTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// depSamples is how many times an iteration of BenchmarkDependencies
// measures each size; the least of them counts.
const depSamples = 3

// BenchmarkDependencies measures the parent's dependency handling per job,
// queueing a graph and running it to its end (see runGraph), for a chain
// and a fan-in of 5,000 and of 50,000 jobs. A sample of the small size runs
// its graph ten times, one of the large size once, so that both handle as
// many jobs. It reports the CPU time per job (its thread's, see threadTime)
// of the least of depSamples samples at each size ("cpu-ns/job-5k", "cpu-ns/job-50k") and their ratio
// ("cost-ratio-10x"): near 1 when the cost grows linearly with the graph,
// near 10 when quadratically.
//
// The figures are the engine's work, not the memory system's: the
// collector is off while a graph runs, and runs between graphs (otherwise
// small graphs, whose heap stays under the collector's 4 MB minimum, would
// pay less for it per job than large ones), and the samples of one size
// follow each other, the large first, right after an untimed large graph
// has grown the heap (otherwise the runtime returns the heap to the system
// while small graphs run, and the large one pays page faults). The least
// sample drops the noise of a busy machine.
func BenchmarkDependencies(b *testing.B) {
	small, large := depSizes[0], depSizes[1]
	for _, shape := range depShapes {
		b.Run(shape.name, func(b *testing.B) {
			defer debug.SetGCPercent(debug.SetGCPercent(-1))
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			run := func(n int) time.Duration {
				runtime.GC()
				start := threadTime()
				p := New(Workers(0))
				last := shape.build(p, n)
				ran := runGraph(p)
				spent := threadTime() - start
				if ran != n || last.Status() != Succeeded || p.open != 0 {
					b.Fatalf("%d jobs: %d ran, the last is %v, %d open", n, ran, last.Status(), p.open)
				}
				return spent
			}
			run(large) // the heap grows to the large graph once, untimed
			least := [2]time.Duration{math.MaxInt64, math.MaxInt64}
			b.ReportAllocs()
			for b.Loop() {
				for _, s := range []int{1, 0} { // the large size first
					n := depSizes[s]
					for range depSamples {
						var spent time.Duration
						for range large / n {
							spent += run(n)
						}
						least[s] = min(least[s], spent)
					}
				}
			}
			perJob := func(s int) float64 { return float64(least[s].Nanoseconds()) / float64(large) }
			b.ReportMetric(perJob(0), fmt.Sprintf("cpu-ns/job-%dk", small/1000))
			b.ReportMetric(perJob(1), fmt.Sprintf("cpu-ns/job-%dk", large/1000))
			b.ReportMetric(perJob(1)/perJob(0), fmt.Sprintf("cost-ratio-%dx", large/small))
		})
	}
}
