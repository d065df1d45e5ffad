package test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/proctest"
)

// The soak (issue 11, Load): many small jobs on more workers than cores,
// items coming and going, workers killed along the way, and nothing lost
// or left behind. It takes a while, so it runs only when asked:
//
//	POOLRUN_SOAK=1 go test -run TestSoak -v ./test/

// envSoak set to 1 runs TestSoak.
const envSoak = "POOLRUN_SOAK"

// The soak's shape: soakJobs jobs on soakWorkers workers, in windows of
// soakSpan jobs that need the same item; the items cycle through
// soakItemSet members of soakItems, so each comes back after it has gone.
// soakKills workers are killed with SIGKILL along the way.
const (
	soakJobs     = 100_000
	soakWorkers  = 4
	soakSpan     = 2_500
	soakItemSet  = 20
	soakItemSize = 64 << 10
	soakKills    = 4
	soakRetries  = 3
)

// soakValue is a soak item's value: its number, and bytes that say it.
type soakValue struct {
	K    int
	Data []byte
}

// soakItems are the soak's items, one per number k.
var soakItems = cachepool.DefineFamily("test.soak", func(ctx context.Context, k int) (*soakValue, error) {
	v := &soakValue{K: k, Data: make([]byte, soakItemSize)}
	for i := range v.Data {
		v.Data[i] = byte(k)
	}
	return v, nil
}, cachepool.Size(func(v *soakValue) int64 { return int64(len(v.Data)) }))

// soakArg is a soak job's argument: its number and the items it needs.
type soakArg struct {
	I     int
	Items []int
}

// soakJob checks the items it needs and returns soakWant of its argument.
var soakJob = engine.Register("test.soak", func(ctx context.Context, a soakArg) (int, error) {
	sum := a.I * 3
	for _, k := range a.Items {
		v, err := soakItems.Item(k).Get(ctx)
		if err != nil {
			return 0, err
		}
		if v.K != k || len(v.Data) != soakItemSize || v.Data[0] != byte(k) || v.Data[len(v.Data)-1] != byte(k) {
			return 0, fmt.Errorf("item %d holds item %d's value", k, v.K)
		}
		sum += 1000 * k
	}
	return sum, nil
})

// soakArgOf returns job i's argument: the item of its window, and for one
// job in three also the next window's, so that the next item is built
// before the last one goes.
func soakArgOf(i int) soakArg {
	w := i / soakSpan
	a := soakArg{I: i, Items: []int{w % soakItemSet}}
	if i%3 == 0 {
		a.Items = append(a.Items, (w+1)%soakItemSet)
	}
	return a
}

func soakWant(a soakArg) int {
	v := a.I * 3
	for _, k := range a.Items {
		v += 1000 * k
	}
	return v
}

// soakFigures are what a soak run saw, for the log.
type soakFigures struct {
	run              time.Duration
	kills, died      int
	retried, retries int
	restarts         int
	graphHeap        uint64
	builds, evicted  uint64
}

// TestSoak runs 100,000 small jobs on 4 workers (on however many cores),
// with items coming and going and 4 workers killed with SIGKILL along the
// way, with retries on. Every job must succeed with its value; afterwards
// no goroutine (goleak) and no descriptor (/proc/self/fd) may be left, and
// the heap must be back near where it started.
func TestSoak(t *testing.T) {
	if os.Getenv(envSoak) != "1" {
		t.Skipf("the soak runs only when asked (6 to 10 s on 2 cores): %s=1 go test -run TestSoak -v ./test/", envSoak)
	}
	// One small pool first, so that what the runtime and the engine start
	// once (the signal goroutine, gob's type tables) is there before.
	warm := engine.New(engine.Workers(2))
	engine.Queue(warm, soakJob, soakArgOf(0), engine.Needs(soakItems.Item(0)))
	if err := warm.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	warm = nil

	ignore := goleak.IgnoreCurrent()
	fdsBefore := openFDs(t)
	heapBefore := heapAfterGC()

	start := time.Now()
	f := soak(t)
	f.run = time.Since(start)

	goleak.VerifyNone(t, ignore)
	fdsAfter := openFDs(t)
	if extra, gone := diff(fdsAfter, fdsBefore), diff(fdsBefore, fdsAfter); len(extra) > 0 || len(gone) > 0 {
		t.Errorf("descriptors: %d before, %d after; new: %v; closed: %v", len(fdsBefore), len(fdsAfter), extra, gone)
	}
	heapAfter := heapAfterGC()
	// Near its start: within a little of what a thousand queued jobs take,
	// against the hundred thousand the graph took.
	if limit := heapBefore + f.graphHeap/100; heapAfter > limit {
		t.Errorf("heap after the soak: %.1f MiB, %.1f MiB before (the graph held %.1f MiB); want under %.1f MiB",
			mib(heapAfter), mib(heapBefore), mib(f.graphHeap), mib(limit))
	}
	t.Logf("%d jobs on %d workers in %v (%.0f jobs/s); %d workers killed, %d died, %d restarted; %d jobs retried (%d retries); %d item builds, %d evictions",
		soakJobs, soakWorkers, f.run.Round(time.Millisecond), soakJobs/f.run.Seconds(), f.kills, f.died, f.restarts, f.retried, f.retries, f.builds, f.evicted)
	t.Logf("parent heap: %.1f MiB before, %.1f MiB more with the graph queued, %.1f MiB after; descriptors: %d before, %d after",
		mib(heapBefore), mib(f.graphHeap), mib(heapAfter), len(fdsBefore), len(fdsAfter))
}

// soak runs the soak's pool and checks its jobs; the pool and the jobs are
// garbage when it returns.
func soak(t *testing.T) soakFigures {
	var f soakFigures
	died := 0 // WorkerDied events, counted by the listener
	p := engine.New(engine.Workers(soakWorkers), engine.Retries(soakRetries),
		engine.OnEvent(func(e engine.Event) {
			if e.Kind == engine.WorkerDied {
				died++
			}
		}))
	before := heapAfterGC()
	jobs := make([]*engine.Job[int], soakJobs)
	for i := range jobs {
		a := soakArgOf(i)
		opts := []engine.JobOption{engine.Needs(soakItems.Item(a.Items[0]))}
		if len(a.Items) > 1 {
			opts = append(opts, engine.Needs(soakItems.Item(a.Items[1])))
		}
		if i%10 == 9 {
			opts = append(opts, engine.After(jobs[i-7]))
		}
		jobs[i] = engine.Queue(p, soakJob, a, opts...)
	}
	f.graphHeap = heapAfterGC() - before

	// The killer: at each of soakKills points along the way, SIGKILL one
	// worker (each time another place), while jobs stream to it.
	p.Go(func(ctx context.Context) error {
		for k := range soakKills {
			at := soakJobs * (k + 1) / (soakKills + 1)
			for {
				st := p.Stats()
				done := 0
				for s, n := range st.Counts {
					if engine.Status(s).Done() {
						done += n
					}
				}
				if done == soakJobs {
					return nil // ended early: the checks below say why
				}
				var w engine.WorkerStats
				if len(st.Workers) > 0 {
					w = st.Workers[k%len(st.Workers)]
				}
				// (Never pid 0, which would be this process group; and
				// ESRCH: the place's process is being replaced; next time.)
				if st.Counts[engine.Succeeded] >= at && w.PID > 0 {
					err := syscall.Kill(w.PID, syscall.SIGKILL)
					if err == nil {
						f.kills++
						break
					}
					if !errors.Is(err, syscall.ESRCH) {
						return fmt.Errorf("killing worker %d (pid %d): %w", w.Index, w.PID, err)
					}
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(2 * time.Millisecond):
				}
			}
		}
		return nil
	})
	if err := p.Run(context.Background()); err != nil {
		t.Errorf("Run: %v", err)
	}

	bad := 0
	for i, j := range jobs {
		v, err := j.Result()
		if want := soakWant(soakArgOf(i)); err != nil || v != want {
			if bad++; bad <= 10 {
				t.Errorf("job %d (%v): %d, %v; want %d", j.ID(), j.Status(), v, err, want)
			}
		}
		if n := len(j.Attempts()); n > 1 {
			f.retried++
			f.retries += n - 1
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d jobs without their value", bad, soakJobs)
	}
	st := p.Stats()
	if st.Counts[engine.Succeeded] != soakJobs {
		t.Errorf("%d jobs succeeded, want %d (counts %v)", st.Counts[engine.Succeeded], soakJobs, st.Counts)
	}
	tot := st.Total()
	f.died, f.restarts, f.builds, f.evicted = died, tot.Restarts, tot.Cache.Builds, tot.Evicted
	if f.kills != soakKills {
		t.Errorf("%d workers killed, want %d", f.kills, soakKills)
	}
	if died != f.kills || f.restarts != f.kills {
		t.Errorf("%d workers killed: %d WorkerDied events, %d restarts; want as many", f.kills, died, f.restarts)
	}
	// Items came and went: each window's item was built (at least once),
	// and evicted from workers while jobs still ran.
	if min := uint64(soakJobs / soakSpan); f.builds < min {
		t.Errorf("%d item builds, want at least %d (one per window)", f.builds, min)
	}
	if f.evicted == 0 {
		t.Error("no item was evicted while the pool ran")
	}
	return f
}

// heapAfterGC returns the live heap after a full collection.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// openFDs lists this process's open descriptors, each with what it is.
func openFDs(t *testing.T) []string {
	held, err := proctest.FDs()
	if err != nil {
		t.Fatal(err)
	}
	var fds []string
	for fd, target := range held {
		fds = append(fds, strconv.Itoa(fd)+" -> "+target)
	}
	slices.Sort(fds)
	return fds
}

// diff returns the elements of a not in b.
func diff(a, b []string) []string {
	var d []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			d = append(d, s)
		}
	}
	return d
}
