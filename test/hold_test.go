package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
)

// phaseItems are 1 MiB items, one per phase number, whose builds and
// cleanups go to the per-process log with the time.
var phaseItems = cachepool.DefineFamily("test.phase", func(ctx context.Context, n int) (*blob, error) {
	logLine(true, "build %d %d", n, time.Now().UnixNano())
	time.Sleep(5 * time.Millisecond)
	return &blob{data: make([]byte, 1<<20)}, nil
},
	cachepool.Cleanup(func(b *blob) { logLine(true, "cleanup %d %d", len(b.data), time.Now().UnixNano()) }),
	cachepool.Size(func(b *blob) int64 { return int64(len(b.data)) }),
)

// phaseJob gets the items of its phases and works for its duration.
type phaseJob struct {
	Phases []int
	Work   time.Duration
	N      int
}

var runPhase = engine.Register("test.phasejob", func(ctx context.Context, j phaseJob) (int, error) {
	for _, ph := range j.Phases {
		if _, err := phaseItems.Item(ph).Get(ctx); err != nil {
			return 0, err
		}
	}
	if j.Work > 0 {
		deadline := time.Now().Add(j.Work)
		for time.Now().Before(deadline) {
		}
	}
	return j.N * 3, nil
})

func phaseNeeds(phases ...int) []engine.JobOption {
	var o []engine.JobOption
	for _, ph := range phases {
		o = append(o, engine.Needs(phaseItems.Item(ph)))
	}
	return o
}

// builds reads the per-process logs under prefix and returns, per process,
// how many times it built each phase's item.
func builds(t *testing.T, prefix string) map[string]map[string]int {
	t.Helper()
	files, _ := filepath.Glob(prefix + ".*")
	out := map[string]map[string]int{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pid := strings.TrimPrefix(filepath.Ext(f), ".")
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			fs := strings.Fields(line)
			if len(fs) == 3 && fs[0] == "build" {
				if out[pid] == nil {
					out[pid] = map[string]int{}
				}
				out[pid][fs[1]]++
			}
		}
	}
	return out
}

// TestPerWorkerEviction queues phases of jobs that need one item each,
// short ones that stream to a worker several at a time and slower ones,
// all at once, and runs them under the per-worker rule and the pool-wide
// one, with and without affinity, over the three transports. No worker
// builds an item twice (the pool-wide rule never does on such a graph),
// every result is right, and the per-worker rule holds no more than the
// pool-wide one.
func TestPerWorkerEviction(t *testing.T) {
	for _, tr := range []transport{pipesTransport, serialTransport, clusterTransport} {
		for _, pol := range []engine.EvictPolicy{engine.EvictStale, engine.EvictPoolWide} {
			for _, aff := range []bool{true, false} {
				name := fmt.Sprintf("%s/%v/affinity=%v", tr.name, pol, aff)
				t.Run(name, func(t *testing.T) {
					logPath := filepath.Join(t.TempDir(), "log")
					t.Setenv(envLog, logPath)
					p := tr.New(t, engine.Evict(pol), engine.Affinity(aff))
					var jobs []*engine.Job[int]
					n := 0
					for ph := range 5 {
						for i := range 60 {
							work := 20 * time.Microsecond
							if i%10 == 0 {
								work = 2 * time.Millisecond
							}
							jobs = append(jobs, engine.Queue(p, runPhase, phaseJob{Phases: []int{ph}, Work: work, N: n}, phaseNeeds(ph)...))
							n++
						}
					}
					if err := p.Run(context.Background()); err != nil {
						t.Fatal(err)
					}
					for i, j := range jobs {
						if v, err := j.Result(); err != nil || v != 3*i {
							t.Errorf("job %d: %d, %v", j.ID(), v, err)
						}
					}
					for pid, byItem := range builds(t, logPath) {
						for item, b := range byItem {
							if b > 1 {
								t.Errorf("process %s built item %s %d times", pid, item, b)
							}
						}
					}
					st := p.Stats()
					tot := st.Total()
					if tot.Cache.Resident != 0 || tot.Cache.Evictions != tot.Cache.Builds {
						t.Errorf("at the end: %+v", tot.Cache)
					}
					t.Logf("builds %d, evicted while running %d, peak of the summed cache %d MiB, stale MiB·s %.3f",
						tot.Cache.Builds, tot.Evicted, st.PeakCacheBytes>>20, st.StaleByteSeconds/(1<<20))
				})
			}
		}
	}
}

// TestAffinityNoStarvation: a ready job whose item no worker holds, queued
// before many whose item the workers hold, is passed over by affinity at
// most the documented number of times (64), and not at all without it.
// Passed over means sent to a worker after them: the order of dispatch,
// which the start times would blur (the lone job builds its item first,
// and a busy machine may pause either worker).
func TestAffinityNoStarvation(t *testing.T) {
	for _, aff := range []bool{true, false} {
		t.Run(fmt.Sprintf("affinity=%v", aff), func(t *testing.T) {
			t.Setenv(envLog, filepath.Join(t.TempDir(), "log"))
			// The jobs in the order they were first sent to a worker.
			var mu sync.Mutex
			var sent []int
			seen := map[int]bool{}
			p := engine.New(engine.Workers(2), engine.Affinity(aff), engine.OnEvent(func(e engine.Event) {
				if e.Kind == engine.JobStatus && e.New == engine.Running {
					mu.Lock()
					if !seen[e.JobID] {
						seen[e.JobID] = true
						sent = append(sent, e.JobID)
					}
					mu.Unlock()
				}
			}))
			// Both workers build item 0 (the jobs are long enough that
			// each worker takes one).
			var warm []engine.Dep
			for i := range 2 {
				warm = append(warm, engine.Queue(p, runPhase, phaseJob{Phases: []int{0}, Work: 200 * time.Millisecond, N: i}, phaseNeeds(0)...))
			}
			lone := engine.Queue(p, stamp, 0, append(phaseNeeds(1), engine.After(warm...))...)
			var many []*engine.Job[span]
			for range 120 {
				many = append(many, engine.Queue(p, stamp, time.Millisecond, append(phaseNeeds(0), engine.After(warm...))...))
			}
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, err := lone.Result(); err != nil {
				t.Fatal(err)
			}
			isMany := map[int]bool{}
			for _, j := range many {
				isMany[j.ID()] = true
			}
			mu.Lock()
			before, found := 0, false
			for _, id := range sent {
				if id == lone.ID() {
					found = true
					break
				}
				if isMany[id] {
					before++
				}
			}
			mu.Unlock()
			if !found {
				t.Fatal("the lone job was never sent to a worker")
			}
			t.Logf("%d jobs whose item the workers held were sent before the lone job", before)
			if aff && (before < 1 || before > 64+2) {
				t.Errorf("with affinity %d of %d jobs were sent before the lone one, want 1 to 64 (+2 sent ahead)", before, len(many))
			}
			if !aff && before > 0 {
				t.Errorf("without affinity %d jobs were sent before the lone one, which was queued first; want none", before)
			}
		})
	}
}

// TestIdleEviction: a worker that finished its job and waits for the next
// evicts the item no job needs any more without being sent a job: the
// item's cleanup runs while another worker's long job still runs (and,
// without idle eviction, only at the end of the pool).
func TestIdleEviction(t *testing.T) {
	for _, idle := range []bool{true, false} {
		t.Run(fmt.Sprintf("idle=%v", idle), func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "log")
			t.Setenv(envLog, logPath)
			p := engine.New(engine.Workers(2), engine.IdleEviction(idle))
			short := engine.Queue(p, runPhase, phaseJob{Phases: []int{7}, Work: 10 * time.Millisecond}, phaseNeeds(7)...)
			long := engine.Queue(p, stamp, 1500*time.Millisecond)
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			_, _, shortEnd := short.Times()
			ls, _ := long.Result()
			files, _ := filepath.Glob(logPath + ".*")
			var cleanup int64
			for _, f := range files {
				data, _ := os.ReadFile(f)
				for _, line := range strings.Split(string(data), "\n") {
					if fs := strings.Fields(line); len(fs) == 3 && fs[0] == "cleanup" {
						cleanup, _ = strconv.ParseInt(fs[2], 10, 64)
					}
				}
			}
			if cleanup == 0 {
				t.Fatal("no cleanup logged")
			}
			after := time.Duration(cleanup - shortEnd.UnixNano())
			t.Logf("the item was cleaned up %v after its last job ended (the long job ended %v after it)", after, time.Duration(ls.End-shortEnd.UnixNano()))
			if idle && cleanup >= ls.End {
				t.Errorf("with idle eviction the item was cleaned up only after the other worker's long job ended")
			}
			if !idle && cleanup < ls.End {
				t.Errorf("without idle eviction the item was cleaned up before the end of the pool")
			}
		})
	}
}

// TestCacheBudget: with a budget of 2.5 items and jobs that need items in
// turn, the cache never holds more than the budget, except for a job that
// needs 3 items by itself, which still runs and is reported.
func TestCacheBudget(t *testing.T) {
	modes(t, func(t *testing.T, tr transport) {
		t.Setenv(envLog, filepath.Join(t.TempDir(), "log"))
		const budget = 5 << 19 // 2.5 MiB
		var mu sync.Mutex
		var over []int
		p := tr.New(t, engine.Evict(engine.EvictNever), engine.CacheBudget(budget),
			engine.OnEvent(func(e engine.Event) {
				if e.Kind == engine.BudgetExceeded {
					mu.Lock()
					over = append(over, e.JobID)
					mu.Unlock()
				}
			}))
		var prev []engine.Dep
		var jobs []*engine.Job[int]
		for i := range 12 {
			o := append(phaseNeeds(10+i%4), engine.After(prev...))
			j := engine.Queue(p, runPhase, phaseJob{Phases: []int{10 + i%4}, N: i}, o...)
			jobs = append(jobs, j)
			prev = []engine.Dep{j}
		}
		if err := p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := p.Stats()
		for _, w := range st.Workers {
			if w.Cache.PeakBytes > budget {
				t.Errorf("worker %d: cache peak %d bytes, budget %d", w.Index, w.Cache.PeakBytes, budget)
			}
		}
		if tot := st.Total(); tot.BudgetEvicted == 0 {
			t.Errorf("no budget eviction: %+v", tot)
		}
		if len(over) != 0 {
			t.Errorf("jobs %v reported over budget; none needs more than one item", over)
		}
		for i, j := range jobs {
			if v, err := j.Result(); err != nil || v != 3*i {
				t.Errorf("job %d: %d, %v", j.ID(), v, err)
			}
		}

		// A job that needs 3 items by itself exceeds the budget, runs, and
		// is reported.
		p = tr.New(t, engine.CacheBudget(budget), engine.OnEvent(func(e engine.Event) {
			if e.Kind == engine.BudgetExceeded {
				mu.Lock()
				over = append(over, e.JobID)
				mu.Unlock()
			}
		}))
		big := engine.Queue(p, runPhase, phaseJob{Phases: []int{20, 21, 22}, N: 5}, phaseNeeds(20, 21, 22)...)
		if err := p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if v, err := big.Result(); err != nil || v != 15 {
			t.Errorf("the big job: %d, %v", v, err)
		}
		if len(over) != 1 || over[0] != big.ID() {
			t.Errorf("over-budget events for jobs %v, want [%d]", over, big.ID())
		}
	})
}
