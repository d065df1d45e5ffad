package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/engine"
)

// policyChain queues, on a pool with the given options, the chain in which
// items P and Q come and go: A(P) -> B(P,Q) -> C(Q) -> D() -> E(P). One job
// runs at a time, so the log of builds, runs and cleanups is in the order
// they happened, whichever workers ran them.
func policyChain(opts ...engine.Option) (*engine.Pool, []*engine.Job[string]) {
	p := engine.New(opts...)
	return p, queuePolicyChain(p)
}

// queuePolicyChain queues policyChain's chain on p.
func queuePolicyChain(p *engine.Pool) []*engine.Job[string] {
	steps := []use{
		{"A", []string{"test.P"}},
		{"B", []string{"test.P", "test.Q"}},
		{"C", []string{"test.Q"}},
		{"D", nil},
		{"E", []string{"test.P"}},
	}
	var jobs []*engine.Job[string]
	for _, s := range steps {
		var jo []engine.JobOption
		for _, name := range s.Items {
			jo = append(jo, engine.Needs(items[name]))
		}
		if len(jobs) > 0 {
			jo = append(jo, engine.After(jobs[len(jobs)-1]))
		}
		jobs = append(jobs, engine.Queue(p, useItems, s, jo...))
	}
	return jobs
}

// policyLogs is what a single worker (or serial mode) does with the chain
// under each policy. Cleanups at the end of the pool, and after a job under
// EvictEachJob, run most recently built first.
var policyLogs = map[engine.EvictPolicy][]string{
	engine.EvictStale: {
		"build test.P", "run A",
		"build test.Q", "run B",
		"run C",                   // P stays: E still needs it
		"cleanup test.Q", "run D", // Q is no longer listed
		"run E",
		"cleanup test.P", // at the end of the pool
	},
	engine.EvictNever: {
		"build test.P", "run A",
		"build test.Q", "run B",
		"run C",
		"run D", // Q stays, though no job needs it any more
		"run E",
		"cleanup test.Q", "cleanup test.P", // only at the end of the pool
	},
	// One job runs at a time, so the pool-wide rule keeps the same items
	// as the per-worker one.
	engine.EvictPoolWide: {
		"build test.P", "run A",
		"build test.Q", "run B",
		"run C",
		"cleanup test.Q", "run D",
		"run E",
		"cleanup test.P",
	},
	engine.EvictEachJob: {
		"build test.P", "run A", "cleanup test.P",
		"build test.P", "build test.Q", "run B", "cleanup test.Q", "cleanup test.P",
		"build test.Q", "run C", "cleanup test.Q",
		"run D",
		"build test.P", "run E", "cleanup test.P",
	},
}

var policies = []engine.EvictPolicy{engine.EvictStale, engine.EvictNever, engine.EvictEachJob, engine.EvictPoolWide}

// runPolicyChain runs the chain and returns its log, checking the results
// and that the workers' statistics agree with the log.
func runPolicyChain(t *testing.T, tr transport, pol engine.EvictPolicy) []string {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "log")
	t.Setenv(envLog, logPath)
	p := tr.New(t, engine.Evict(pol))
	jobs := queuePolicyChain(p)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, j := range jobs {
		if v, err := j.Result(); err != nil || v != string(rune('A'+i)) {
			t.Errorf("job %d: %q, %v", i+1, v, err)
		}
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	log := strings.Split(strings.TrimSpace(string(data)), "\n")
	st := p.Stats()
	builds, evictions := st.Total().Cache.Builds, st.Total().Cache.Evictions
	for _, w := range st.Workers {
		if w.Cache.Resident != 0 {
			t.Errorf("worker %d holds %d items after the pool", w.Index, w.Cache.Resident)
		}
	}
	b, c := prefixed(log, "build "), prefixed(log, "cleanup ")
	if builds != uint64(b) || evictions != uint64(c) {
		t.Errorf("stats: %d builds, %d evictions; the log has %d builds, %d cleanups", builds, evictions, b, c)
	}
	t.Logf("%v, %s: %d builds, %d evictions", pol, tr.name, builds, evictions)
	return log
}

func prefixed(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// TestEvictPolicies runs the chain under each policy with one worker
// process, serially, and with one remote worker over the cluster: the log
// of builds, runs and cleanups is exactly the one the policy implies, and
// the same in all modes.
func TestEvictPolicies(t *testing.T) {
	trs := []transport{{name: "one worker", workers: 1}, serialTransport, {name: "cluster, one worker", remote: 1}}
	for _, pol := range policies {
		for _, tr := range trs {
			t.Run(fmt.Sprintf("%v/%s", pol, tr.name), func(t *testing.T) {
				if pol == engine.EvictPoolWide && tr.remote > 0 {
					// Known bug: under EvictPoolWide the scheduler publishes
					// only the shared (mmap) window, never a remote worker's
					// own, so a remote worker never sees a set, keeps
					// everything (cluster.kvReader: generation 0 reads as
					// overflowed) and its log is EvictNever's.
					t.Skip("EvictPoolWide does not publish remote workers' windows (engine: scheduler.publishLocked)")
				}
				log := runPolicyChain(t, tr, pol)
				if want := policyLogs[pol]; !slices.Equal(log, want) {
					t.Errorf("log:\n  %s\nwant:\n  %s", strings.Join(log, "\n  "), strings.Join(want, "\n  "))
				}
			})
		}
	}
}

// policyModel is what the policy implies for the chain when job i runs on
// worker on[i]: the log up to the last job's run, then the cleanups at the
// end of the pool, sorted (the workers clear their caches concurrently).
func policyModel(pol engine.EvictPolicy, on []int) (log, end []string) {
	steps := [][]string{{"P"}, {"P", "Q"}, {"Q"}, nil, {"P"}}
	caches := map[int][]string{} // per worker, in the order built
	// evict cleans up the items of worker w that keep rejects, most
	// recently built first.
	evict := func(w int, keep func(string) bool) {
		var kept []string
		c := caches[w]
		for i := len(c) - 1; i >= 0; i-- {
			if keep(c[i]) {
				kept = append([]string{c[i]}, kept...)
			} else {
				log = append(log, "cleanup test."+c[i])
			}
		}
		caches[w] = kept
	}
	for i, needs := range steps {
		w := on[i]
		if pol == engine.EvictStale || pol == engine.EvictPoolWide {
			evict(w, func(it string) bool { // still needed by this job or a later one
				for _, later := range steps[i:] {
					if slices.Contains(later, it) {
						return true
					}
				}
				return false
			})
		}
		for _, it := range needs {
			if !slices.Contains(caches[w], it) {
				log = append(log, "build test."+it)
				caches[w] = append(caches[w], it)
			}
		}
		log = append(log, "run "+string(rune('A'+i)))
		if pol == engine.EvictEachJob {
			evict(w, func(string) bool { return false })
		}
	}
	n := len(log)
	for w := range caches {
		evict(w, func(string) bool { return false })
	}
	end = slices.Sorted(slices.Values(log[n:]))
	return log[:n], end
}

// TestPolicyModel checks the model against the logs of one worker.
func TestPolicyModel(t *testing.T) {
	for _, pol := range policies {
		log, end := policyModel(pol, []int{1, 1, 1, 1, 1})
		if !matchesModel(policyLogs[pol], log, end) {
			t.Errorf("%v: model\n  %s\n  then %s\nwant\n  %s", pol, strings.Join(log, "\n  "), strings.Join(end, ", "), strings.Join(policyLogs[pol], "\n  "))
		}
	}
}

// TestEvictPoliciesTwoWorkers runs the chain under each policy with two
// worker processes, where the scheduler decides which worker runs which
// job: the log is the one the policy implies for the placement it chose.
// Eviction while idle is off: with it, the idle worker's cleanups happen
// while the other worker runs, in no fixed order with its log lines
// (TestIdleEviction covers it); before each job, a worker keeps exactly the
// items of that job and the later ones, under the per-worker rule as under
// the pool-wide one, since one job runs at a time.
func TestEvictPoliciesTwoWorkers(t *testing.T) {
	for _, pol := range policies {
		t.Run(pol.String(), func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "log")
			t.Setenv(envLog, logPath)
			p, jobs := policyChain(engine.Workers(2), engine.Evict(pol), engine.IdleEviction(false))
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			var on []int
			for _, j := range jobs {
				on = append(on, j.Worker())
			}
			data, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSpace(string(data)), "\n")
			log, end := policyModel(pol, on)
			if !matchesModel(got, log, end) {
				t.Errorf("jobs on workers %v; log:\n  %s\nwant:\n  %s\n  then, in any order: %s",
					on, strings.Join(got, "\n  "), strings.Join(log, "\n  "), strings.Join(end, ", "))
			}
			t.Logf("jobs on workers %v", on)
		})
	}
}

// matchesModel reports whether got is log followed by end in any order.
func matchesModel(got, log, end []string) bool {
	return len(got) == len(log)+len(end) && slices.Equal(got[:len(log)], log) &&
		slices.Equal(slices.Sorted(slices.Values(got[len(log):])), end)
}
