package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/enginehost"
)

// The items of the item-event tests: each value's size is its Size.
var (
	itemSmall = cachepool.Define("engine_test.items.small", func(context.Context) ([]byte, error) { return make([]byte, 1000), nil },
		cachepool.Size(func(b []byte) int64 { return int64(len(b)) }))
	itemLarge = cachepool.Define("engine_test.items.large", func(context.Context) ([]byte, error) { return make([]byte, 5000), nil },
		cachepool.Size(func(b []byte) int64 { return int64(len(b)) }))
	useItems = engine.Register("engine_test.items.use", func(ctx context.Context, which []string) (int, error) {
		n := 0
		for _, w := range which {
			it := itemSmall
			if w == "large" {
				it = itemLarge
			}
			b, err := it.Get(ctx)
			if err != nil {
				return 0, err
			}
			n += len(b)
		}
		return n, nil
	})
)

// itemLog collects a pool's ItemBuilt and ItemEvicted events.
type itemLog struct {
	mu     sync.Mutex
	events []engine.Event
}

func (l *itemLog) listen(e engine.Event) {
	if e.Kind == engine.ItemBuilt || e.Kind == engine.ItemEvicted {
		l.mu.Lock()
		l.events = append(l.events, e)
		l.mu.Unlock()
	}
}

// TestItemEvents checks that every worker, whatever its link, reports the
// builds and evictions of its items, named and sized, with times and
// reasons.
func TestItemEvents(t *testing.T) {
	for _, tc := range []struct {
		name    string
		workers engine.Option
	}{
		{"processes", engine.Workers(1)},
		{"in-process", engine.InProcess(1)},
		{"serial", engine.Workers(0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log itemLog
			start := time.Now()
			p := engine.New(tc.workers, engine.OnEvent(log.listen))
			a := engine.Queue(p, useItems, []string{"small"}, engine.Needs(itemSmall))
			engine.Queue(p, useItems, []string{"large"}, engine.Needs(itemLarge), engine.After(a))
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			end := time.Now()
			type life struct {
				built, evicted int
				reason         engine.EvictReason
			}
			lives := map[string]*life{}
			for _, e := range log.events {
				l := lives[e.Item]
				if l == nil {
					l = &life{}
					lives[e.Item] = l
				}
				if e.Worker != 1 {
					t.Errorf("%v of %s on worker %d, want 1", e.Kind, e.Item, e.Worker)
				}
				if e.ItemStart.Before(start.Add(-time.Second)) || e.ItemEnd.After(end.Add(time.Second)) || e.ItemEnd.Before(e.ItemStart) {
					t.Errorf("%v of %s: times %v..%v, pool ran %v..%v", e.Kind, e.Item, e.ItemStart, e.ItemEnd, start, end)
				}
				want := int64(1000)
				if e.Item == itemLarge.Name() {
					want = 5000
				}
				if e.ItemBytes != want {
					t.Errorf("%v of %s: %d bytes, want %d", e.Kind, e.Item, e.ItemBytes, want)
				}
				switch e.Kind {
				case engine.ItemBuilt:
					l.built++
				case engine.ItemEvicted:
					l.evicted++
					l.reason = e.Reason
				}
			}
			// small is freed once the first job is done (by the policy,
			// before the second job); large at the end.
			want := map[string]life{
				itemSmall.Name(): {1, 1, engine.EvictedByPolicy},
				itemLarge.Name(): {1, 1, engine.EvictedAtEnd},
			}
			for name, w := range want {
				if l := lives[name]; l == nil || *l != w {
					t.Errorf("%s: %+v, want %+v (events: %v)", name, l, w, log.events)
				}
			}
		})
	}
}

// TestItemEventsBudget checks the reason of an eviction for the cache
// budget.
func TestItemEventsBudget(t *testing.T) {
	var log itemLog
	p := engine.New(engine.InProcess(1), engine.OnEvent(log.listen), engine.CacheBudget(1500), engine.Evict(engine.EvictNever))
	a := engine.Queue(p, useItems, []string{"small"}, engine.Needs(itemSmall))
	engine.Queue(p, useItems, []string{"large"}, engine.Needs(itemLarge), engine.After(a))
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range log.events {
		if e.Kind == engine.ItemEvicted {
			got = append(got, fmt.Sprintf("%s:%v", e.Item, e.Reason))
		}
	}
	want := []string{itemSmall.Name() + ":budget", itemLarge.Name() + ":end"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("evictions %v, want %v", got, want)
	}
}

// TestItemEventsRemote checks that a worker that joined over byte streams
// (Admit and Serve, as a transport across hosts carries them) reports its
// items as the others do.
func TestItemEventsRemote(t *testing.T) {
	w, win := servePipes(t)
	w.Window = shmPublisher{win}
	var log itemLog
	p := engine.New(engine.RemoteOnly(10*time.Second), engine.OnEvent(log.listen), hooks.Joiner(func(ctx context.Context, p enginehost.Pool) {
		if err := p.Admit(w); err != nil {
			t.Error(err)
		}
	}))
	a := engine.Queue(p, useItems, []string{"small"}, engine.Needs(itemSmall))
	engine.Queue(p, useItems, []string{"large"}, engine.Needs(itemLarge), engine.After(a))
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range log.events {
		got = append(got, fmt.Sprintf("%v %s %d %v", e.Kind, e.Item, e.ItemBytes, e.Reason))
	}
	want := []string{
		"built " + itemSmall.Name() + " 1000 reason(0)",
		"evicted " + itemSmall.Name() + " 1000 policy",
		"built " + itemLarge.Name() + " 5000 reason(0)",
		"evicted " + itemLarge.Name() + " 5000 end",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events\n%v\nwant\n%v", got, want)
	}
}
