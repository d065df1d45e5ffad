//go:build linux

package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"golang.org/x/sys/unix"
)

// The parent's side of a large graph: what a queued job costs in memory,
// and what dependency handling costs per job as graphs grow.

// loadJobs is the size of the graph of BenchmarkQueuedJobMemory (issue 11:
// a graph of 100,000 queued jobs costs the parent less than 1 KiB per job);
// under -short a hundredth.
func loadJobs() int {
	if testing.Short() {
		return 1_000
	}
	return 100_000
}

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
// and the size of the job record itself ("record-B"): without a listener,
// and with one (OnEvent), whose events wait in memory until Run delivers
// them.
func BenchmarkQueuedJobMemory(b *testing.B) {
	items := make([]cachepool.Handle, 200)
	for i := range items {
		items[i] = handle(fmt.Sprint("load.item", i))
	}
	for _, listener := range []bool{false, true} {
		name := "plain"
		if listener {
			name = "listener"
		}
		b.Run(name, func(b *testing.B) {
			var opts []Option
			if listener {
				opts = append(opts, OnEvent(func(Event) {}))
			}
			var perJob float64
			n := loadJobs()
			for b.Loop() {
				before := heapAfterGC()
				p := New(opts...)
				jobs := queueLoad(p, n, items)
				after := heapAfterGC()
				if got := p.counts[Pending] + p.counts[Queued]; got != n {
					b.Fatalf("%d jobs pending or queued, want %d", got, n)
				}
				runtime.KeepAlive(p)
				runtime.KeepAlive(jobs)
				perJob = (float64(after) - float64(before)) / float64(n)
			}
			b.ReportMetric(perJob, "B/job")
			b.ReportMetric(float64(reflect.TypeFor[job]().Size()), "record-B")
		})
	}
}

// depSizes returns the two graph sizes whose per-job costs
// BenchmarkDependencies compares; the larger is a multiple of the smaller.
// Under -short they are a tenth.
func depSizes() [2]int {
	if testing.Short() {
		return [2]int{500, 5_000}
	}
	return [2]int{5_000, 50_000}
}

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

// TestReadyQueueInOrder drives the ready queue as large graphs do: runs of
// jobs pushed in order of id (the sorted groups' constant-time path),
// popped as they go, with now and then a job pushed out of order (sent back
// by a worker's death), which makes its group a heap until it empties. The
// lowest id comes first throughout.
func TestReadyQueueInOrder(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	var q readyQueue
	var model []int // the ids queued, in increasing order
	next, popped := 1, []int(nil)
	sigs := []string{"", "a", "b"}
	for range 20_000 {
		switch r := rng.IntN(100); {
		case r < 50: // the next job in order
			q.push(&job{id: next, sig: sigs[next%len(sigs)]})
			model = append(model, next)
			next++
		case r < 53 && len(popped) > 0: // one back out of order
			i := rng.IntN(len(popped))
			id := popped[i]
			popped = slices.Delete(popped, i, i+1)
			q.push(&job{id: id, sig: sigs[id%len(sigs)]})
			model = append(model, id)
			slices.Sort(model)
		case len(model) > 0:
			got := q.peek()
			if got == nil || got.id != model[0] {
				t.Fatalf("peek: %v, want job %d", got, model[0])
			}
			q.pop()
			popped = append(popped, model[0])
			model = model[1:]
		}
	}
	for _, want := range model {
		if got := q.peek(); got == nil || got.id != want {
			t.Fatalf("draining: %v, want job %d", got, want)
		}
		q.pop()
	}
	if q.peek() != nil || len(q.groups) != 0 {
		t.Fatalf("queue not empty after draining: %d groups", len(q.groups))
	}
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
// many jobs; samples of the two sizes alternate, depSamples of each per
// iteration. It reports the CPU time per job (its thread's, see
// threadTime) of the least sample of each size ("cpu-ns/job-5k",
// "cpu-ns/job-50k") and their ratio ("cost-ratio-10x"): near 1 when the
// cost grows linearly with the graph, near 10 when quadratically.
//
// The figures are the engine's work, not the memory system's: every sample
// starts on a freshly collected heap and allocates as much as another (50,000
// jobs' worth), and the collector does not run during a sample (otherwise
// a small graph, whose heap stays under the collector's 4 MB minimum, would
// pay less for it per job than a large one, and the runtime would return to
// the system, between large graphs, the memory the next one faults in
// again). The least sample drops the noise of a busy machine.
func BenchmarkDependencies(b *testing.B) {
	sizes := depSizes()
	small, large := sizes[0], sizes[1]
	for _, shape := range depShapes {
		b.Run(shape.name, func(b *testing.B) {
			// The collector runs only when called (a percentage this
			// large keeps the runtime's heap goal, and what it retains
			// for the next sample, far above any graph here).
			defer debug.SetGCPercent(debug.SetGCPercent(1 << 20))
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			run := func(n int) time.Duration {
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
			run(large) // the heap grows to a sample's size once, untimed
			least := [2]time.Duration{math.MaxInt64, math.MaxInt64}
			b.ReportAllocs()
			for b.Loop() {
				for range depSamples {
					for s, n := range sizes {
						runtime.GC()
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
