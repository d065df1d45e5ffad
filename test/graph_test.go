package test

import (
	"context"
	"testing"

	"github.com/poolrun/poolrun/engine"
)

// Deep and wide graphs with real workers (issue 11, Load). What their
// dependency handling costs as they grow is measured by
// BenchmarkDependencies in package engine.

// inc returns its argument plus one: a chain of incs counts its length.
var inc = engine.Register("test.inc", func(ctx context.Context, x int) (int, error) { return x + 1, nil })

// chainLen and fanInWidth are the sizes the issue asks for.
const (
	chainLen   = 10_000
	fanInWidth = 50_000
)

// fanInJobs is the number of jobs before the fan-in job: fanInWidth, or a
// fifth of it under the race detector, which makes every job some ten
// times dearer (the full width would take 10 s there, 1.3 s without).
func fanInJobs() int {
	if raceEnabled {
		return fanInWidth / 5
	}
	return fanInWidth
}

// TestDeepChain runs a chain of 10,000 jobs, each after the one before it,
// on two workers (and serially, and a chain of 1,000 over the cluster,
// where each link is a round trip through the NATS server): every job
// succeeds with its own value, and none started before the one it waits
// for had ended.
func TestDeepChain(t *testing.T) {
	modes(t, func(t *testing.T, tr transport) {
		n := chainLen
		if tr.remote > 0 {
			n /= 10
		}
		testDeepChain(t, tr.New(t), n)
	})
}

func testDeepChain(t *testing.T, p *engine.Pool, chainLen int) {
	jobs := make([]*engine.Job[int], chainLen)
	jobs[0] = engine.Queue(p, inc, 0)
	for i := 1; i < chainLen; i++ {
		jobs[i] = engine.Queue(p, inc, i, engine.After(jobs[i-1]))
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	bad, early := 0, 0
	var prevEnd int64
	for i, j := range jobs {
		v, err := j.Result()
		_, started, ended := j.Times()
		if err != nil || v != i+1 {
			if bad++; bad <= 5 {
				t.Errorf("job %d of the chain: %d, %v; want %d", i, v, err, i+1)
			}
		}
		// Start and end are the workers' clocks, the same host's.
		if i > 0 && started.UnixNano() < prevEnd {
			if early++; early <= 5 {
				t.Errorf("job %d of the chain started at %v, before the one it waits for ended", i, started)
			}
		}
		prevEnd = ended.UnixNano()
	}
	if bad > 0 || early > 0 {
		t.Fatalf("of %d jobs of the chain, %d did not give their value and %d started too early", chainLen, bad, early)
	}
	if got := p.Stats().Counts[engine.Succeeded]; got != chainLen {
		t.Errorf("%d jobs succeeded, want %d", got, chainLen)
	}
}

// TestWideFanIn runs a job after 50,000 others (see fanInJobs) on two
// workers (and serially, and after a tenth of them over the cluster): it
// runs last, after every one of them has succeeded with its value.
func TestWideFanIn(t *testing.T) {
	modes(t, func(t *testing.T, tr transport) {
		width := fanInJobs()
		if tr.remote > 0 {
			width /= 10
		}
		testWideFanIn(t, tr.New(t), width)
	})
}

func testWideFanIn(t *testing.T, p *engine.Pool, width int) {
	jobs := make([]*engine.Job[int], width)
	deps := make([]engine.Dep, width)
	for i := range jobs {
		jobs[i] = engine.Queue(p, inc, i)
		deps[i] = jobs[i]
	}
	last := engine.Queue(p, inc, -1, engine.After(deps...))
	if st := last.Status(); st != engine.Pending {
		t.Fatalf("the fan-in job is %v before Run, want pending", st)
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v, err := last.Result(); err != nil || v != 0 {
		t.Fatalf("the fan-in job: %d, %v; want 0", v, err)
	}
	_, lastStart, _ := last.Times()
	bad := 0
	for i, j := range jobs {
		v, err := j.Result()
		_, _, ended := j.Times()
		if err != nil || v != i+1 || ended.After(lastStart) {
			bad++
			if bad <= 5 {
				t.Errorf("job %d: %d, %v, ended %v; want %d, ended before the fan-in job started at %v", i, v, err, ended, i+1, lastStart)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d jobs before the fan-in job are wrong", bad, width)
	}
	if got := p.Stats().Counts[engine.Succeeded]; got != width+1 {
		t.Errorf("%d jobs succeeded, want %d", got, width+1)
	}
}
