package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cachepool"
)

// The scheduler's sets and counts of places (placeChanged) against its
// places' fields, checked at every event of pools that send jobs ahead,
// revoke them, cancel them, time them out, lose workers and hold items.

var (
	// placesItems are items of 1 KiB each, which take a millisecond to
	// build.
	placesItems = func() []*cachepool.Item[[]byte] {
		var its []*cachepool.Item[[]byte]
		for i := range 8 {
			its = append(its, cachepool.Define(fmt.Sprint("engine.places.item", i), func(context.Context) ([]byte, error) {
				time.Sleep(time.Millisecond)
				return make([]byte, 1024), nil
			}, cachepool.Size(func(b []byte) int64 { return int64(len(b)) })))
		}
		return its
	}()

	// placesNap sleeps for its argument, or until its context ends.
	placesNap = Register("engine.places.nap", func(ctx context.Context, d time.Duration) (int, error) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		return 0, nil
	})

	// placesStuck sleeps for its argument whatever its context says.
	placesStuck = Register("engine.places.stuck", func(ctx context.Context, d time.Duration) (int, error) {
		time.Sleep(d)
		return 0, nil
	})

	// placesUse gets its items, then sleeps.
	placesUse = Register("engine.places.use", func(ctx context.Context, u use) (int, error) {
		for _, i := range u.Items {
			if _, err := placesItems[i].Get(ctx); err != nil {
				return 0, err
			}
		}
		time.Sleep(u.Sleep)
		return len(u.Items), nil
	})
)

// A use is a job of placesUse: the placesItems it gets, and how long it
// sleeps then.
type use struct {
	Items []int
	Sleep time.Duration
}

// queueUse queues a job of placesUse that declares its items.
func queueUse(p *Pool, u use) {
	hs := make([]cachepool.Handle, len(u.Items))
	for k, i := range u.Items {
		hs[k] = placesItems[i]
	}
	Queue(p, placesUse, u, Needs(hs...))
}

// checkPlaces reports how the scheduler's sets and counts of places differ
// from what the places' fields say (see placeChanged), and its memory
// figures from what the workers' reports say; nil if they agree. p.mu is
// held.
func (s *scheduler) checkPlaces() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	var free, busy, soon, linked, revoking, takers, donors int
	var curSum, stale int64
	cached := map[uint64]cachedItem{}
	for i, pl := range s.places {
		if pl.index != i+1 {
			bad("%v at places[%d]", pl, i)
		}
		n := len(pl.inflight)
		serving := pl.l != nil && pl.ready && !pl.stopping
		var in struct{ free, busy, soon, linked bool }
		in.free = serving && n == 0 && pl.kill == nil
		in.busy = serving && n > 0 && pl.kill == nil
		in.soon = pl.soon()
		in.linked = pl.l != nil && !pl.removed
		if pl.in != in {
			bad("%v counts as %+v, want %+v", pl, pl.in, in)
		}
		for _, c := range []struct {
			in bool
			n  *int
		}{{in.free, &free}, {in.busy, &busy}, {in.soon, &soon}, {in.linked, &linked}} {
			if c.in {
				*c.n++
			}
		}
		rev := 0
		for k, j := range pl.inflight {
			if j.revoking {
				revoking++
			}
			if k > 0 && revocable(j) {
				rev++
			}
			if j.Status() != Running && s.p.state == PoolRunning {
				bad("%v has job %d in flight, %v", pl, j.id, j.Status())
			}
		}
		funcs := map[*funcEntry]int{}
		for _, j := range pl.inflight {
			funcs[j.fn]++
		}
		for _, c := range pl.funcs {
			if funcs[c.fn] != c.n {
				bad("%v counts %d jobs of %s in flight, has %d", pl, c.n, c.fn.name, funcs[c.fn])
			}
			delete(funcs, c.fn)
		}
		if len(funcs) > 0 {
			bad("%v does not count jobs in flight of %d functions", pl, len(funcs))
		}
		if pl.revocable != rev {
			bad("%v counts %d jobs to take back, has %d", pl, pl.revocable, rev)
		}
		taker := serving && n < maxInFlight && pl.waitRound != s.round && !pl.blocked
		if got := pl.takerSlot >= 0; got != taker {
			bad("%v among the takers: %v, want %v", pl, got, taker)
		} else if got {
			takers++
			if pl.takerSlot >= len(s.takers.pls) || s.takers.pls[pl.takerSlot] != pl {
				bad("%v: wrong taker slot %d", pl, pl.takerSlot)
			}
		}
		donor := pl.l != nil && !pl.stopping && pl.kill == nil && rev > 0
		if got := pl.donorSlot >= 0; got != donor {
			bad("%v among the donors: %v, want %v", pl, got, donor)
		} else if got {
			donors++
			if pl.donorSlot >= len(s.donors.pls) || s.donors.pls[pl.donorSlot] != pl {
				bad("%v: wrong donor slot %d", pl, pl.donorSlot)
			}
		}
		if in.busy && (s.firstDeadline.IsZero() || s.firstDeadline.After(s.deadline(pl))) {
			bad("firstDeadline %v after %v's deadline %v", s.firstDeadline, pl, s.deadline(pl))
		}
		if pl.l != nil && !pl.ready && !pl.stopping && !pl.timedOut && (s.firstHello.IsZero() || s.firstHello.After(pl.helloBy)) {
			bad("firstHello %v after %v's handshake due %v", s.firstHello, pl, pl.helloBy)
		}
		if pl.held.changed && !pl.removed && (s.perWorker || pl.win != s.shared) && !slices.Contains(s.republish, pl) {
			bad("%v: its held keys changed, not listed to publish", pl)
		}
		curSum += pl.cur.Bytes
		for k, b := range pl.resident {
			c := cached[k]
			c.bytes += b
			c.places++
			cached[k] = c
			if !s.p.refs.has(k) {
				stale += b
			}
		}
	}
	for _, pl := range s.waiting {
		if pl.waitRound != s.round {
			bad("%v waits, not this round", pl)
		}
	}
	for _, h := range []*placeHeap{&s.takers, &s.donors} {
		for i := 1; i < len(h.pls); i++ {
			if h.order(h.pls[i], h.pls[(i-1)/2]) {
				bad("heap order: %v above %v", h.pls[(i-1)/2], h.pls[i])
			}
		}
	}
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"free", s.free, free}, {"busy", s.busy, busy}, {"soon", s.soon, soon}, {"linked", s.linked, linked},
		{"revoking", s.revoking, revoking}, {"takers", len(s.takers.pls), takers}, {"donors", len(s.donors.pls), donors},
	} {
		if c.got != c.want {
			bad("%s: %d, want %d", c.name, c.got, c.want)
		}
	}
	if s.curSum != curSum || s.staleNow != stale {
		bad("cache bytes %d, stale %d; want %d, %d", s.curSum, s.staleNow, curSum, stale)
	}
	if !maps.Equal(s.cached, cached) {
		bad("cached items %v, want %v", s.cached, cached)
	}
	return errors.Join(errs...)
}

// TestPlaceSets runs pools whose scheduler checks its sets and counts of
// places (checkPlaces) at every event.
func TestPlaceSets(t *testing.T) {
	tests := []struct {
		name  string
		opts  []Option
		queue func(p *Pool)
	}{
		{"ahead-and-revokes", []Option{InProcess(6)}, func(p *Pool) {
			// Short jobs sent ahead, behind long ones that make idle
			// workers take them back.
			for i := range 400 {
				d := 20 * time.Microsecond
				if i%50 == 7 {
					d = 30 * time.Millisecond
				}
				Queue(p, placesNap, d)
			}
		}},
		{"items", []Option{InProcess(5)}, func(p *Pool) {
			for i := range 200 {
				queueUse(p, use{Items: []int{i % 8, (i*3 + 1) % 8}})
			}
		}},
		{"items-affinity-waits", []Option{InProcess(4)}, func(p *Pool) {
			// Jobs too long to stream, short enough to go one ahead
			// where they build nothing; groups of a few, whose holders
			// run them sooner than another worker would build them.
			for i := range 120 {
				queueUse(p, use{Items: []int{i / 3 % 8}, Sleep: 300 * time.Microsecond})
			}
		}},
		{"items-budget", []Option{InProcess(4), CacheBudget(3 << 10)}, func(p *Pool) {
			for i := range 150 {
				queueUse(p, use{Items: []int{i % 5, (i + 2) % 8}})
			}
		}},
		{"items-pool-wide", []Option{InProcess(4), Evict(EvictPoolWide)}, func(p *Pool) {
			for i := range 150 {
				queueUse(p, use{Items: []int{i % 8}})
			}
		}},
		{"cancels-timeouts-deaths", []Option{InProcess(4), func(c *config) { c.grace = 20 * time.Millisecond }, Retries(1)}, func(p *Pool) {
			var later []*Job[int]
			for i := range 60 {
				switch i % 6 {
				case 0:
					Queue(p, placesNap, time.Second, JobTimeout(10*time.Millisecond))
				case 1:
					// Past its timeout and its grace: its worker is
					// abandoned, and replaced.
					Queue(p, placesStuck, 60*time.Millisecond, JobTimeout(5*time.Millisecond))
				case 2:
					later = append(later, Queue(p, placesNap, time.Second))
				default:
					Queue(p, placesNap, time.Duration(i)*100*time.Microsecond)
				}
			}
			p.Go(func(ctx context.Context) error {
				for _, j := range later {
					for j.Status() != Running {
						select {
						case <-ctx.Done():
							return nil
						case <-time.After(time.Millisecond):
						}
					}
					j.Cancel("test")
				}
				return nil
			})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p *Pool
			var mu sync.Mutex
			var first error
			checks := 0
			check := OnEvent(func(Event) {
				p.mu.Lock()
				defer p.mu.Unlock()
				if p.sched == nil {
					return
				}
				err := p.sched.checkPlaces()
				mu.Lock()
				defer mu.Unlock()
				checks++
				if err != nil && first == nil {
					first = err
				}
			})
			p = New(append(tc.opts, check)...)
			tc.queue(p)
			err := p.Run(context.Background())
			var je *JobError
			if err != nil && !errors.As(err, &je) {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if first != nil {
				t.Fatal(first)
			}
			t.Logf("%d checks; Run: %v", checks, err != nil)
		})
	}
}

// TestInflight pushes and drops jobs in flight at a place, first or
// later ones, against a plain slice; in the steady state of a worker at
// maxInFlight, a reply and a job sent allocate nothing.
func TestInflight(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	jobs := make([]*job, 2000)
	for i := range jobs {
		jobs[i] = &job{id: i + 1}
	}
	pl := &place{}
	var want []*job
	for _, j := range jobs {
		for len(want) > 0 && (len(want) == maxInFlight || rng.IntN(2) == 0) {
			i := 0
			if rng.IntN(8) == 0 {
				i = rng.IntN(len(want))
			}
			pl.dropInflight(i)
			want = slices.Delete(want, i, i+1)
		}
		pl.pushInflight(j)
		want = append(want, j)
		if !slices.Equal(pl.inflight, want) {
			t.Fatalf("after job %d: in flight %v, want %v", j.id, pl.inflight, want)
		}
	}
	pl = &place{}
	for _, j := range jobs[:maxInFlight] {
		pl.pushInflight(j)
	}
	next := maxInFlight
	if n := testing.AllocsPerRun(10, func() {
		for range 1000 {
			pl.dropInflight(0)
			pl.pushInflight(jobs[next%len(jobs)])
			next++
		}
	}); n != 0 {
		t.Errorf("1,000 replies and jobs sent at %d in flight: %v allocations, want 0", maxInFlight, n)
	}
}
