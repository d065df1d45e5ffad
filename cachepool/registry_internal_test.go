package cachepool

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

var internalSeq atomic.Int64

func TestKeyFromHash(t *testing.T) {
	tests := []struct {
		name string
		hash uint64
		want uint64
	}{
		{"zero maps to ZeroHashKey", 0, ZeroHashKey},
		{"one stays", 1, 1},
		{"max stays", ^uint64(0), ^uint64(0)},
		{"ZeroHashKey stays", ZeroHashKey, ZeroHashKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := keyFromHash(tt.hash); got != tt.want {
				t.Errorf("keyFromHash(%#x) = %#x, want %#x", tt.hash, got, tt.want)
			}
		})
	}
	if ZeroHashKey == 0 {
		t.Fatal("ZeroHashKey is 0")
	}
}

func panicMessage(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// TestRegistryCollisions forces keys that real names would need a 64-bit
// hash collision to produce.
func TestRegistryCollisions(t *testing.T) {
	mk := func(name string, key uint64, site string) *base {
		return &base{name: name, key: key, site: site, typ: "int"}
	}
	tests := []struct {
		name  string
		first *base
		then  *base
		want  []string // substrings of the panic; nil: no panic
	}{
		{
			name:  "different name, same key",
			first: mk("atlas", 42, "a/a.go:1"),
			then:  mk("mesh", 42, "b/b.go:2"),
			want:  []string{`"atlas"`, `"mesh"`, "a/a.go:1", "b/b.go:2", "same key", "0x000000000000002a"},
		},
		{
			name:  "same name, different key",
			first: mk("atlas", 42, "a/a.go:1"),
			then:  mk("atlas", 43, "b/b.go:2"),
			want:  []string{`"atlas"`, "defined twice", "a/a.go:1", "b/b.go:2"},
		},
		{
			name:  "a name that hashes to 0 against ZeroHashKey",
			first: mk("hashes to zero", keyFromHash(0), "a/a.go:1"),
			then:  mk("hashes to the constant", ZeroHashKey, "b/b.go:2"),
			want:  []string{`"hashes to zero"`, `"hashes to the constant"`, "same key"},
		},
		{
			name:  "distinct",
			first: mk("atlas", 42, "a/a.go:1"),
			then:  mk("mesh", 43, "b/b.go:2"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRegistry()
			r.add(tt.first)
			msg := panicMessage(func() { r.add(tt.then) })
			if tt.want == nil {
				if msg != "" {
					t.Fatalf("unexpected panic: %s", msg)
				}
				if r.byKeyLookup(tt.then.key) != tt.then || tt.then.id == tt.first.id || tt.then.id == 0 {
					t.Errorf("second item not registered under its own id: ids %d, %d", tt.first.id, tt.then.id)
				}
				return
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("panic %q does not contain %q", msg, w)
				}
			}
			if r.byKeyLookup(tt.first.key) != tt.first || len(r.byName) != 1 || tt.then.id != 0 {
				t.Errorf("the rejected definition changed the registry")
			}
		})
	}
}

func TestRegistryFamilies(t *testing.T) {
	r := newRegistry()
	r.addFamily("cells", "a/a.go:1")
	r.addFamily("cells2", "a/a.go:2")
	msg := panicMessage(func() { r.addFamily("cells", "b/b.go:3") })
	for _, w := range []string{`"cells"`, "a/a.go:1", "b/b.go:3"} {
		if !strings.Contains(msg, w) {
			t.Errorf("panic %q does not contain %q", msg, w)
		}
	}
}

// TestSlotTableGrowth checks that growing the table keeps every entry and
// that a reader holding the old table cannot get a value that was evicted
// after the growth: it sees the entry's own state.
func TestSlotTableGrowth(t *testing.T) {
	c := New()
	small := &entry{b: &base{id: 3}}
	small.state.Store(stateReady)
	c.mu.Lock()
	c.setSlot(3, small)
	old := c.table.Load()
	big := &entry{b: &base{id: 5000}}
	c.setSlot(5000, big)
	c.setSlot(6000, nil) // clearing beyond the table does not grow it
	c.mu.Unlock()

	if c.slot(3) != small || c.slot(5000) != big || c.slot(4999) != nil || c.slot(-1) != nil || c.slot(1<<30) != nil {
		t.Fatal("entries lost or invented by growth")
	}
	if n := len(c.table.Load().slots); n < 5001 || n > 2*6000 {
		t.Errorf("table of %d slots for id 5000", n)
	}
	if old.slots[3].Load() != small {
		t.Fatal("old table lost its entry")
	}
	// Evict small after the growth: the old table still points at it, but
	// its state tells a lock-free reader to go the slow way.
	c.mu.Lock()
	c.resident, c.keys = []*entry{small}, []uint64{small.b.key}
	c.mu.Unlock()
	c.Clear()
	if e := old.slots[3].Load(); e == small && e.state.Load() == stateReady {
		t.Error("a stale table still offers the evicted entry as ready")
	}
	if c.slot(3) != nil {
		t.Error("evicted entry still in the current table")
	}
}

// TestEntryLifecycle walks one item through build, eviction and rebuild and
// checks the state machine and the slot at each step.
func TestEntryLifecycle(t *testing.T) {
	name := fmt.Sprintf("internal/%s#%d", t.Name(), internalSeq.Add(1)) // -count > 1
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	it := Define(name, func(context.Context) (int, error) { return 1, nil },
		Cleanup(func(int) { entered <- struct{}{}; <-release }))
	c := New()
	ctx := WithCache(context.Background(), c)
	if _, err := it.Get(ctx); err != nil {
		t.Fatal(err)
	}
	e := c.slot(it.id)
	if e == nil || e.state.Load() != stateReady {
		t.Fatalf("after Get: entry %v", e)
	}
	done := make(chan struct{})
	go func() { c.Clear(); close(done) }()
	<-entered
	if c.slot(it.id) != e || e.state.Load() != stateEvicting {
		t.Errorf("during cleanup: slot %p state %d, want the entry, evicting", c.slot(it.id), e.state.Load())
	}
	select {
	case <-e.gone:
		t.Error("gone closed before the cleanup returned")
	default:
	}
	close(release)
	<-done
	if c.slot(it.id) != nil || e.state.Load() != stateEvicted {
		t.Errorf("after cleanup: slot %p state %d", c.slot(it.id), e.state.Load())
	}
	if _, err := it.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if e2 := c.slot(it.id); e2 == e || e2.state.Load() != stateReady {
		t.Error("the rebuild reused the evicted entry")
	}
}
