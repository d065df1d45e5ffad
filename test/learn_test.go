package test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
)

// The items of the learning tests, which no function or job declares.
var (
	learnItems = [3]*cachepool.Item[int]{
		cachepool.Define("learn-a", func(context.Context) (int, error) { return 1, nil }),
		cachepool.Define("learn-b", func(context.Context) (int, error) { return 2, nil }),
		cachepool.Define("learn-c", func(context.Context) (int, error) { return 4, nil }),
	}
	learnFamily = cachepool.DefineFamily("learn-fam", func(_ context.Context, n int) (int, error) { return n, nil })

	// learnUse gets the three items, declaring none.
	learnUse = engine.Register("test.learn-use", func(ctx context.Context, i int) (int, error) {
		sum := i
		for _, it := range learnItems {
			v, err := it.Get(ctx)
			if err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	})
	// learnResident says how many items its worker's cache holds.
	learnResident = engine.Register("test.learn-resident", func(ctx context.Context, _ int) (int, error) {
		return cachepool.FromContext(ctx).Stats().Resident, nil
	})
	// learnFamUse gets a member of a family, declaring none.
	learnFamUse = engine.Register("test.learn-family", func(ctx context.Context, i int) (int, error) {
		return learnFamily.Item(i % 3).Get(ctx)
	})
)

// learnModes are the kinds of workers the learning tests run on.
var learnModes = []struct {
	name    string
	opt     engine.Option
	workers int
}{
	{"processes", engine.Workers(2), 2},
	{"in-process", engine.InProcess(2), 2},
	{"serial", engine.Workers(0), 1},
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// learnRun runs one job of learnUse, then n-1 after it and, after those,
// one learnResident job per worker; it returns the builds the workers made
// after the first job's, the resident counts the last jobs saw, the
// ItemLearned events and what the pool wrote on stderr.
type learnRun struct {
	buildsAfterFirst uint64
	resident         []int
	learned          []engine.Event
	stderr           string
	errs             []error
}

func runLearn(t *testing.T, opt engine.Option, workers, n int, opts ...engine.Option) learnRun {
	t.Helper()
	var r learnRun
	var mu sync.Mutex
	var stderr lockedBuffer
	opts = append(opts, opt, engine.WorkerOutput(&stderr, &stderr), engine.OnEvent(func(e engine.Event) {
		if e.Kind == engine.ItemLearned {
			mu.Lock()
			r.learned = append(r.learned, e)
			mu.Unlock()
		}
	}))
	p := engine.New(opts...)
	first := engine.Queue(p, learnUse, 0)
	var rest []engine.Dep
	var jobs []*engine.Job[int]
	for i := 1; i < n; i++ {
		j := engine.Queue(p, learnUse, i, engine.After(first))
		rest = append(rest, j)
		jobs = append(jobs, j)
	}
	var res []*engine.Job[int]
	for range workers {
		res = append(res, engine.Queue(p, learnResident, 0, engine.After(rest...)))
	}
	if err := p.Run(context.Background()); err != nil {
		var je *engine.JobError
		for _, e := range unwrapAll(err) {
			if errors.As(e, &je) {
				r.errs = append(r.errs, je)
			}
		}
		if len(r.errs) == 0 {
			t.Fatal(err)
		}
	}
	if r.errs == nil {
		for i, j := range append([]*engine.Job[int]{first}, jobs...) {
			if v, err := j.Result(); err != nil || v != i+7 {
				t.Errorf("job %d: %d, %v; want %d", i, v, err, i+7)
			}
		}
		for _, j := range res {
			v, err := j.Result()
			if err != nil {
				t.Fatal(err)
			}
			r.resident = append(r.resident, v)
		}
	}
	// The first job ran alone: its builds are the first three.
	var builds uint64
	for _, ws := range p.Stats().Workers {
		builds += ws.Cache.Builds
	}
	if builds >= 3 {
		r.buildsAfterFirst = builds - 3
	}
	r.stderr = stderr.String()
	return r
}

func unwrapAll(err error) []error {
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range u.Unwrap() {
			out = append(out, unwrapAll(e)...)
		}
		return out
	}
	return []error{err}
}

// TestLearnItems: 100 jobs that get three items without declaring them.
// With learning (the default), the pool learns them from the first job's
// reply, and each worker builds each at most once after it; the items are
// freed once no job of the function remains; the pool says so once per
// item. Without, every job builds the three again.
func TestLearnItems(t *testing.T) {
	for _, m := range learnModes {
		t.Run(m.name, func(t *testing.T) {
			on := runLearn(t, m.opt, m.workers, 100)
			if max := uint64(3 * m.workers); on.buildsAfterFirst > max {
				t.Errorf("learning on: %d builds after the first job, want at most %d (3 items, %d workers)", on.buildsAfterFirst, max, m.workers)
			}
			for i, n := range on.resident {
				if n != 0 {
					t.Errorf("learning on: a job after the function's last saw %d items resident on its worker (%d), want 0: the learned items outlived their jobs", n, i)
				}
			}
			if len(on.learned) != 3 {
				t.Errorf("learning on: %d ItemLearned events, want 3: %+v", len(on.learned), on.learned)
			}
			for _, e := range on.learned {
				if e.Func != "test.learn-use" || !strings.HasPrefix(e.Item, "learn-") {
					t.Errorf("event %+v: want Func test.learn-use and a learn- item", e)
				}
			}
			for _, name := range []string{"learn-a", "learn-b", "learn-c"} {
				if c := strings.Count(on.stderr, fmt.Sprintf("get item %q without declaring it", name)); c != 1 {
					t.Errorf("learning on: stderr says %d times that %s is undeclared, want once:\n%s", c, name, on.stderr)
				}
			}
			if !strings.Contains(on.stderr, "engine.Uses") {
				t.Errorf("stderr does not say what to declare:\n%s", on.stderr)
			}

			off := runLearn(t, m.opt, m.workers, 100, engine.LearnItems(false))
			if want := uint64(3 * 99); off.buildsAfterFirst != want {
				t.Errorf("learning off: %d builds after the first job, want %d (every job builds its three)", off.buildsAfterFirst, want)
			}
			if len(off.learned) != 0 || off.stderr != "" {
				t.Errorf("learning off: events %+v, stderr %q; want none", off.learned, off.stderr)
			}
		})
	}
}

// TestLearnItemsAtOnce is the program of the issue: 100 jobs queued at
// once on 2 workers. Jobs sent before the pool learned may build again;
// far fewer than without learning do.
func TestLearnItemsAtOnce(t *testing.T) {
	count := func(opts ...engine.Option) uint64 {
		p := engine.New(append(opts, engine.Workers(2), engine.WorkerOutput(&lockedBuffer{}, &lockedBuffer{}))...)
		for i := range 100 {
			engine.Queue(p, learnUse, i)
		}
		if err := p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		var b uint64
		for _, ws := range p.Stats().Workers {
			b += ws.Cache.Builds
		}
		return b
	}
	on, off := count(), count(engine.LearnItems(false))
	t.Logf("100 jobs on 2 workers: %d builds with learning, %d without", on, off)
	if off != 300 {
		t.Errorf("without learning: %d builds, want 300", off)
	}
	if on > off/5 {
		t.Errorf("with learning: %d builds, want at most %d (a fifth of those without)", on, off/5)
	}
}

// TestStrictItems: an undeclared Get fails its job, naming the item and
// the function; the item is not built.
func TestStrictItems(t *testing.T) {
	for _, m := range learnModes {
		t.Run(m.name, func(t *testing.T) {
			p := engine.New(m.opt, engine.StrictItems(), engine.WorkerOutput(&lockedBuffer{}, &lockedBuffer{}))
			j := engine.Queue(p, learnUse, 1)
			ok := engine.Queue(p, learnUse, 2, engine.Needs(learnItems[0], learnItems[1], learnItems[2]))
			if err := p.Run(context.Background()); err == nil {
				t.Fatal("Run succeeded; want the undeclared job's failure")
			}
			_, err := j.Result()
			if err == nil || !strings.Contains(err.Error(), `"learn-a"`) || !strings.Contains(err.Error(), `"test.learn-use"`) {
				t.Errorf("undeclared job: error %v; want one naming item learn-a and function test.learn-use", err)
			}
			if v, err := ok.Result(); err != nil || v != 9 {
				t.Errorf("declared job: %d, %v; want 9", v, err)
			}
			var builds uint64
			for _, ws := range p.Stats().Workers {
				builds += ws.Cache.Builds
			}
			if builds != 3 {
				t.Errorf("%d builds, want 3 (the declared job's; the strict Get builds nothing)", builds)
			}
		})
	}
}

// TestLearnFamily: members of a family are not learned; the pool says so
// once for the function and family.
func TestLearnFamily(t *testing.T) {
	var mu sync.Mutex
	var events []engine.Event
	var stderr lockedBuffer
	p := engine.New(engine.Workers(2), engine.WorkerOutput(&stderr, &stderr), engine.OnEvent(func(e engine.Event) {
		if e.Kind == engine.ItemLearned {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}
	}))
	for i := range 30 {
		engine.Queue(p, learnFamUse, i)
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || !strings.HasPrefix(events[0].Item, "learn-fam:") {
		t.Errorf("events %+v; want one ItemLearned for a learn-fam member", events)
	}
	if c := strings.Count(stderr.String(), `family "learn-fam"`); c != 1 {
		t.Errorf("stderr names the family %d times, want once:\n%s", c, stderr.String())
	}
}

// learnGate holds learnWait's jobs until it is closed (in-process
// workers only: the channel is this process's). Each test run makes it.
var learnGate chan struct{}

var learnWait = engine.Register("test.learn-wait", func(ctx context.Context, _ int) (int, error) {
	select {
	case <-learnGate:
		return 0, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
})

// TestLearnItemsQueuedLater: jobs queued after the pool learned an item
// (by a scheduler, while the pool runs) count it from the start. They
// wait for a gate that opens once all are queued, so that the window
// never finds the function without jobs meanwhile (its items would then
// rightly go).
func TestLearnItemsQueuedLater(t *testing.T) {
	learnGate = make(chan struct{})
	p := engine.New(engine.InProcess(2), engine.WorkerOutput(&lockedBuffer{}, &lockedBuffer{}))
	first := engine.Queue(p, learnUse, 0)
	p.Go(func(ctx context.Context) error {
		select {
		case <-first.Done():
		case <-ctx.Done():
			return ctx.Err()
		}
		gate := engine.Queue(p, learnWait, 0)
		for i := 1; i < 100; i++ {
			engine.Queue(p, learnUse, i, engine.After(gate))
		}
		close(learnGate)
		return nil
	})
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var builds uint64
	for _, ws := range p.Stats().Workers {
		builds += ws.Cache.Builds
	}
	if builds > 3+3*2 {
		t.Errorf("%d builds, want at most 9: the first job's three, and three per worker after", builds)
	}
}

// learnCleaned is set, in a worker's process, when learnBig's value is
// evicted (its cleanup).
var learnCleaned atomic.Bool

var (
	learnBig = cachepool.Define("learn-big", func(context.Context) ([]byte, error) {
		learnCleaned.Store(false)
		return make([]byte, 100), nil
	}, cachepool.Size(func(b []byte) int64 { return int64(len(b)) }),
		cachepool.Cleanup(func([]byte) { learnCleaned.Store(true) }))
	learnOther = cachepool.Define("learn-other", func(context.Context) ([]byte, error) {
		return make([]byte, 100), nil
	}, cachepool.Size(func(b []byte) int64 { return int64(len(b)) }))

	// learnBudget gets learnBig, then learnOther (whose build goes past
	// the budget), then checks that learnBig was not evicted meanwhile.
	learnBudget = engine.Register("test.learn-budget", func(ctx context.Context, _ int) (bool, error) {
		if _, err := learnBig.Get(ctx); err != nil {
			return false, err
		}
		if _, err := learnOther.Get(ctx); err != nil {
			return false, err
		}
		return !learnCleaned.Load(), nil
	})
)

// TestLearnedItemKeptWhileUsed: a job that got an item undeclared may
// still use it: the budget's evictions, made while the job builds another,
// leave it alone, as they leave the job's declared items.
func TestLearnedItemKeptWhileUsed(t *testing.T) {
	for _, m := range learnModes {
		t.Run(m.name, func(t *testing.T) {
			p := engine.New(m.opt, engine.CacheBudget(150), engine.WorkerOutput(&lockedBuffer{}, &lockedBuffer{}))
			j := engine.Queue(p, learnBudget, 0)
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if kept, err := j.Result(); err != nil || !kept {
				t.Errorf("kept %v, %v: the budget evicted an item the running job had got", kept, err)
			}
		})
	}
}
