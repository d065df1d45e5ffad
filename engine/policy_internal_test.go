package engine

import (
	"context"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/shm"
)

var (
	policyA = cachepool.Define("engine.policy.A", func(context.Context) (int, error) { return 1, nil })
	policyB = cachepool.Define("engine.policy.B", func(context.Context) (int, error) { return 2, nil })

	// policyGet gets the named items (of policyA and policyB).
	policyGet = Register("engine.policy.get", func(ctx context.Context, names []string) (int, error) {
		for _, n := range names {
			it := map[string]*cachepool.Item[int]{"A": policyA, "B": policyB}[n]
			if _, err := it.Get(ctx); err != nil {
				return 0, err
			}
		}
		return len(names), nil
	})
)

// TestRunnerPolicy runs two jobs through a worker's runner under each
// policy: the first needs A and B while the window lists both, the second
// needs B once the window lists only B.
func TestRunnerPolicy(t *testing.T) {
	type after struct{ evicted, builds, evictions, resident int }
	tests := []struct {
		name   string
		policy EvictPolicy
		want   [2]after
	}{
		// A goes before the second job: it is no longer listed.
		{"stale", EvictStale, [2]after{{0, 2, 0, 2}, {1, 2, 1, 1}}},
		// Nothing goes during the pool.
		{"never", EvictNever, [2]after{{0, 2, 0, 2}, {0, 2, 0, 2}}},
		// Everything goes after every job; the second builds B again.
		{"each-job", EvictEachJob, [2]after{{2, 2, 2, 0}, {1, 3, 3, 0}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			win, err := shm.Create(0)
			if err != nil {
				t.Fatal(err)
			}
			defer win.Close()
			cache := cachepool.New()
			r := &runner{win: shmReader{win}, cache: cache, policy: tc.policy, maxValue: DefaultMaxValueSize, base: cachepool.WithCache(context.Background(), cache)}
			defer r.cache.Clear()
			steps := []struct {
				window []uint64
				needs  []string
			}{
				{[]uint64{policyA.Key(), policyB.Key()}, []string{"A", "B"}},
				{[]uint64{policyB.Key()}, []string{"B"}},
			}
			for i, s := range steps {
				gen, err := win.Publish(s.window)
				if err != nil {
					t.Fatal(err)
				}
				arg, err := encodeValue(s.needs, DefaultMaxValueSize)
				if err != nil {
					t.Fatal(err)
				}
				lastState = nil
				rep := new(reply)
				r.runTask(context.Background(), discardConn{}, &task{id: uint64(i + 1), gen: gen, fn: policyGet.Name(), arg: arg}, rep)
				if rep.outcome != outcomeOK {
					t.Fatalf("job %d: outcome %d: %s", i+1, rep.outcome, rep.payload)
				}
				evicted := rep.evicted // after the job; before it, in a state report
				if lastState != nil {
					evicted += lastState.evicted
				}
				got := after{evicted, int(rep.stats.Builds), int(rep.stats.Evictions), rep.stats.Resident}
				if got != tc.want[i] {
					t.Errorf("after job %d: {evicted builds evictions resident} = %v, want %v", i+1, got, tc.want[i])
				}
			}
		})
	}
}

func TestHelloPolicy(t *testing.T) {
	for _, pol := range []EvictPolicy{EvictStale, EvictNever, EvictEachJob, EvictPoolWide} {
		var e enc
		want := workerParams{policy: pol, budget: 5 << 20, idle: pol == EvictStale}
		e.hello(7, want)
		kind, d, err := newFrameReader(strings.NewReader(string(e.b))).next()
		if err != nil || kind != frameHello {
			t.Fatalf("%v: frame kind %d, %v", pol, kind, err)
		}
		n, got, err := d.hello()
		if err != nil || n != 7 || got != want {
			t.Errorf("hello(7, %v) decodes as %d, %v, %v", pol, n, got, err)
		}
	}
	var e enc
	e.hello(7, workerParams{policy: numPolicies})
	_, d, err := newFrameReader(strings.NewReader(string(e.b))).next()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.hello(); err == nil || !strings.Contains(err.Error(), "unknown eviction policy") {
		t.Errorf("hello with policy %d: error %v, want an unknown policy", numPolicies, err)
	}
}

func TestEvictUnknownPanics(t *testing.T) {
	defer func() {
		if v := recover(); v == nil || !strings.HasPrefix(v.(string), "engine: Evict") {
			t.Errorf("Evict(%d) recovered %v, want a panic naming engine: Evict", numPolicies, v)
		}
	}()
	Evict(numPolicies)
}

func TestPolicyString(t *testing.T) {
	for p, want := range map[EvictPolicy]string{EvictStale: "stale", EvictNever: "never", EvictEachJob: "each-job", 9: "policy(9)"} {
		if got := p.String(); got != want {
			t.Errorf("EvictPolicy(%d).String() = %q, want %q", uint8(p), got, want)
		}
	}
}

// discardConn is a workerConn whose reports go nowhere.
type discardConn struct{}

func (discardConn) next() (*task, bool, error)              { return nil, true, nil }
func (discardConn) ready() bool                             { return false }
func (discardConn) done(*reply) error                       { return nil }
func (discardConn) state(s *workerState) error              { lastState = s; return nil }
func (discardConn) bye(*byeInfo) error                      { return nil }
func (discardConn) alive() error                            { return nil }
func (discardConn) running(uint64, context.CancelCauseFunc) {}
func (discardConn) started(uint64, time.Time) error         { return nil }
func (discardConn) release() error                          { return nil }
func (discardConn) control() *jobControl                    { return new(jobControl) }

// lastState is the last state a discardConn was given.
var lastState *workerState

// policyLarge is an item past freeThreshold, every page written.
var policyLarge = cachepool.Define("engine.policy.large", func(context.Context) ([]byte, error) {
	b := make([]byte, 2*freeThreshold)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	return b, nil
}, cachepool.Size(func(b []byte) int64 { return int64(len(b)) }))

// TestRunnerReturnsMemory evicts an item past freeThreshold from a runner
// that returns memory, idle and before a job that builds another item:
// when sync returns, the evicted bytes have left the heap and gone back to
// the system. (A build that followed a collection alone did not reuse
// them: BenchmarkHold's workers at 4 held both items' pages.)
func TestRunnerReturnsMemory(t *testing.T) {
	tests := []struct {
		name string
		cur  *task // the job at hand
	}{
		{"idle", nil},
		{"before a job that builds", &task{keys: []uint64{policyA.Key()}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			win, err := shm.Create(0)
			if err != nil {
				t.Fatal(err)
			}
			defer win.Close()
			cache := cachepool.New()
			defer cache.Clear()
			r := &runner{win: shmReader{win}, cache: cache, policy: EvictStale, returnMemory: true}
			gen, err := win.Publish([]uint64{policyLarge.Key()})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.sync(gen); err != nil {
				t.Fatal(err)
			}
			if _, err := policyLarge.Get(cachepool.WithCache(context.Background(), cache)); err != nil {
				t.Fatal(err)
			}
			r.lastBytes = cache.Stats().Bytes
			if gen, err = win.Publish(nil); err != nil {
				t.Fatal(err)
			}
			before := heapBytes()
			r.cur = tc.cur
			if n, err := r.sync(gen); n != 1 || err != nil {
				t.Fatalf("sync evicted %d items, %v; want 1", n, err)
			}
			after := heapBytes()
			const want = 2 * freeThreshold * 3 / 4 // of the item's bytes
			if int64(before.inUse)-int64(after.inUse) < want {
				t.Errorf("heap in use %d bytes before the eviction, %d after; want %d fewer", before.inUse, after.inUse, 2*freeThreshold)
			}
			if int64(after.released)-int64(before.released) < want {
				t.Errorf("heap released to the system: %d bytes before the eviction, %d after; want %d more", before.released, after.released, 2*freeThreshold)
			}
		})
	}
}

type heapFigures struct{ inUse, released uint64 }

// heapBytes reads the heap's bytes in objects and those released to the
// system.
func heapBytes() heapFigures {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return heapFigures{s[0].Value.Uint64(), s[1].Value.Uint64()}
}
