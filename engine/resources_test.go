package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
)

// load counts what the in-process jobs of a test take at once, and the
// most they took.
type load struct {
	mu        sync.Mutex
	slots     int
	mem       int64
	maxSlots  int
	maxMem    int64
	maxActive int
	active    int
}

var loads sync.Map // test name -> *load

// loadArg is the argument of a loadJob.
type loadArg struct {
	Test  string
	Slots int
	Mem   int64
	Nap   time.Duration
}

// loadJob counts its resources in its test's load while it runs, for
// arg.Nap (in-process workers only: the load is this process's).
var loadJob = engine.Register("engine_test.load", func(ctx context.Context, a loadArg) (struct{}, error) {
	v, _ := loads.Load(a.Test)
	l := v.(*load)
	l.mu.Lock()
	l.slots += a.Slots
	l.mem += a.Mem
	l.active++
	l.maxSlots, l.maxMem, l.maxActive = max(l.maxSlots, l.slots), max(l.maxMem, l.mem), max(l.maxActive, l.active)
	l.mu.Unlock()
	select {
	case <-time.After(a.Nap):
	case <-ctx.Done():
	}
	l.mu.Lock()
	l.slots -= a.Slots
	l.mem -= a.Mem
	l.active--
	l.mu.Unlock()
	return struct{}{}, ctx.Err()
})

func newLoad(t *testing.T) *load {
	l := &load{}
	loads.Store(t.Name(), l)
	t.Cleanup(func() { loads.Delete(t.Name()) })
	return l
}

// The jobs in flight never take more than the capacity: slots and memory,
// with in-process workers, whose load the jobs count themselves.
func TestCapacityBoundsInFlight(t *testing.T) {
	for _, tc := range []struct {
		name string
		cap  engine.Resources
	}{
		{"slots", engine.Resources{Slots: 4}},
		{"memory", engine.Resources{Memory: 4 << 20}},
		{"both", engine.Resources{Slots: 3, Memory: 3 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLoad(t)
			p := engine.New(engine.InProcess(4), engine.Capacity(tc.cap))
			for i := range 24 {
				n := 1 + i%3
				a := loadArg{Test: t.Name(), Slots: n, Mem: int64(n) << 20, Nap: time.Millisecond}
				engine.Queue(p, loadJob, a, engine.JobResources(engine.Resources{Slots: n, Memory: a.Mem}))
			}
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if tc.cap.Slots > 0 && l.maxSlots > tc.cap.Slots {
				t.Errorf("%d slots in use at once; capacity %d", l.maxSlots, tc.cap.Slots)
			}
			if tc.cap.Memory > 0 && l.maxMem > tc.cap.Memory {
				t.Errorf("%d bytes in use at once; capacity %d", l.maxMem, tc.cap.Memory)
			}
			if l.maxActive < 2 {
				t.Errorf("at most %d job at once: the capacity leaves room for more", l.maxActive)
			}
		})
	}
}

// A job larger than the capacity runs alone; so do jobs of slots > the
// workers.
func TestCapacityLargeJobRunsAlone(t *testing.T) {
	l := newLoad(t)
	p := engine.New(engine.InProcess(3), engine.Capacity(engine.Resources{Slots: 2, Memory: 1 << 20}))
	big := engine.Queue(p, loadJob, loadArg{Test: t.Name(), Slots: 5, Nap: 5 * time.Millisecond}, engine.JobResources(engine.Resources{Slots: 5}))
	huge := engine.Queue(p, loadJob, loadArg{Test: t.Name(), Slots: 1, Mem: 8 << 20, Nap: 5 * time.Millisecond}, engine.JobResources(engine.Resources{Memory: 8 << 20}))
	var small []*engine.Job[struct{}]
	for range 6 {
		small = append(small, engine.Queue(p, loadJob, loadArg{Test: t.Name(), Slots: 1, Nap: time.Millisecond}))
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, big := range []*engine.Job[struct{}]{big, huge} {
		_, s, e := big.Times()
		for i, j := range small {
			_, s2, e2 := j.Times()
			if s2.Before(e) && s.Before(e2) {
				t.Errorf("job %d ran %v..%v, with the large job %d (%v..%v)", i, s2, e2, big.ID(), s, e)
			}
		}
	}
	if l.maxSlots > 5 {
		t.Errorf("%d slots at once: the large job did not run alone", l.maxSlots)
	}
}

// The oldest job that does not fit holds back the younger ones that
// would (strict oldest-first: a large job is not starved).
func TestCapacityOldestFirst(t *testing.T) {
	newLoad(t)
	p := engine.New(engine.InProcess(3), engine.Capacity(engine.Resources{Slots: 2}))
	first := engine.Queue(p, loadJob, loadArg{Test: t.Name(), Slots: 1, Nap: 20 * time.Millisecond})
	wide := engine.Queue(p, loadJob, loadArg{Test: t.Name(), Slots: 2, Nap: time.Millisecond}, engine.JobResources(engine.Resources{Slots: 2}))
	small := engine.Queue(p, loadJob, loadArg{Test: t.Name(), Slots: 1, Nap: time.Millisecond})
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, _, firstEnd := first.Times()
	wideStart, wideEnd := times(wide)
	smallStart, _ := times(small)
	if wideStart.Before(firstEnd) {
		t.Errorf("the 2-slot job started at %v, before the first ended (%v)", wideStart, firstEnd)
	}
	if smallStart.Before(wideEnd) {
		t.Errorf("the younger 1-slot job started at %v, before the older 2-slot one ended (%v): it passed it", smallStart, wideEnd)
	}
}

func times(j *engine.Job[struct{}]) (start, end time.Time) {
	_, start, end = j.Times()
	return start, end
}

// With worker processes, jobs whose slots sum past the capacity never
// overlap: two 2-slot jobs at a capacity of 2, each of which fails if it
// finds the other's marker file.
func TestCapacityWorkerProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	dir := t.TempDir()
	p := engine.New(engine.Workers(2), engine.Capacity(engine.Resources{Slots: 2}))
	var jobs []*engine.Job[struct{}]
	for i := range 4 {
		jobs = append(jobs, engine.Queue(p, exclusive, exclusiveArg{Dir: dir, Name: fmt.Sprint(i)}, engine.JobResources(engine.Resources{Slots: 2})))
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, j := range jobs {
		if _, err := j.Result(); err != nil {
			t.Errorf("job %d: %v", i, err)
		}
	}
}

// exclusiveArg names a marker file in Dir.
type exclusiveArg struct{ Dir, Name string }

// exclusive makes its marker in a.Dir, fails if another marker is there,
// naps a little, checks again, and removes its marker.
var exclusive = engine.Register("engine_test.exclusive", func(ctx context.Context, a exclusiveArg) (struct{}, error) {
	mine := filepath.Join(a.Dir, a.Name)
	if err := os.WriteFile(mine, nil, 0o644); err != nil {
		return struct{}{}, err
	}
	defer os.Remove(mine)
	check := func() error {
		ents, err := os.ReadDir(a.Dir)
		if err != nil {
			return err
		}
		var others []string
		for _, e := range ents {
			if e.Name() != a.Name {
				others = append(others, e.Name())
			}
		}
		if len(others) > 0 {
			return fmt.Errorf("job %s runs with %s", a.Name, strings.Join(others, ", "))
		}
		return nil
	}
	if err := check(); err != nil {
		return struct{}{}, err
	}
	select {
	case <-time.After(10 * time.Millisecond):
	case <-ctx.Done():
		return struct{}{}, ctx.Err()
	}
	return struct{}{}, check()
})

// A Capacity bounds what runs at once: here one job of 2 slots, or two
// of 1.
func ExampleCapacity() {
	p := engine.New(engine.InProcess(2), engine.Capacity(engine.Resources{Slots: 2, Memory: 1 << 30}))
	wide := engine.Queue(p, wordCount, []string{"echo", "uses", "two", "threads"},
		engine.JobResources(engine.Resources{Slots: 2, Memory: 512 << 20}))
	narrow := engine.Queue(p, wordCount, []string{"echo", "one"})
	if err := p.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	a, _ := wide.Result()
	b, _ := narrow.Result()
	fmt.Println(a, b)
	// Output: 3 1
}

// meetings: test name -> *meeting, for the meet jobs of a test.
var meetings sync.Map

// meeting is where a test's meet jobs wait for one another.
type meeting struct {
	mu      sync.Mutex
	arrived int
	all     chan struct{} // closed when the last one arrives
}

// meetArg says which test's meeting a meet job joins, and how many jobs
// make it.
type meetArg struct {
	Test string
	N    int
}

// meet waits, up to 10 seconds, until a.N meet jobs of its test run at
// once (in-process workers), and fails if they never do.
var meet = engine.Register("engine_test.meet", func(ctx context.Context, a meetArg) (struct{}, error) {
	v, _ := meetings.Load(a.Test)
	m := v.(*meeting)
	m.mu.Lock()
	if m.arrived++; m.arrived == a.N {
		close(m.all)
	}
	m.mu.Unlock()
	select {
	case <-m.all:
		return struct{}{}, nil
	case <-time.After(10 * time.Second):
		return struct{}{}, fmt.Errorf("the other %d job(s) did not run with this one", a.N-1)
	case <-ctx.Done():
		return struct{}{}, ctx.Err()
	}
})

// Named resources: two jobs that take a GPU each run at once with two
// GPUs, and so do jobs that take a resource the capacity does not list
// (it has no limit); with worker processes and one GPU they never
// overlap.
func TestCapacityNamed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit map[string]int64
		takes map[string]int64
	}{
		{"within the limit", map[string]int64{"gpu": 2}, map[string]int64{"gpu": 1}},
		{"no limit for the name", map[string]int64{"gpu": 1}, map[string]int64{"licence": 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meetings.Store(t.Name(), &meeting{all: make(chan struct{})})
			t.Cleanup(func() { meetings.Delete(t.Name()) })
			p := engine.New(engine.InProcess(2), engine.Capacity(engine.Resources{Named: tc.limit}))
			for range 2 {
				engine.Queue(p, meet, meetArg{Test: t.Name(), N: 2}, engine.JobResources(engine.Resources{Named: tc.takes}))
			}
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("one at a time", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts worker processes")
		}
		dir := t.TempDir()
		p := engine.New(engine.Workers(2), engine.Capacity(engine.Resources{Slots: 4, Named: map[string]int64{"gpu": 1}}))
		var jobs []*engine.Job[struct{}]
		for i := range 4 {
			jobs = append(jobs, engine.Queue(p, exclusive, exclusiveArg{Dir: dir, Name: fmt.Sprint(i)},
				engine.JobResources(engine.Resources{Named: map[string]int64{"gpu": 1}})))
		}
		if err := p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		for i, j := range jobs {
			if _, err := j.Result(); err != nil {
				t.Errorf("job %d: %v", i, err)
			}
		}
	})
}
