package cachepool_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cachepool"
)

func TestJournal(t *testing.T) {
	ctx, c := newCtx(t)
	items := sizedItems(t, 300, 100)
	getAll(t, ctx, items, 0) // before the journal: not recorded
	if got, n := c.TakeJournal(nil); got != nil || n != 0 {
		t.Fatalf("TakeJournal with the journal off = %v, %d; want nil, 0", got, n)
	}
	c.SetJournal(true)
	before := time.Now()
	getAll(t, ctx, items, 1, 0, 1) // one build, hits
	failing := cachepool.Define(uniqueName(t, "failing"), func(context.Context) (int, error) { return 0, errors.New("no") })
	if _, err := failing.Get(ctx); err == nil {
		t.Fatal("a failing build returned no error")
	}
	c.Evict(func(k uint64) bool { return k != items[0].Key() })
	c.Clear()
	after := time.Now()

	got, dropped := c.TakeJournal(nil)
	if dropped != 0 {
		t.Errorf("dropped %d records", dropped)
	}
	want := []struct {
		key     uint64
		bytes   int64
		evicted bool
	}{
		{items[1].Key(), 100, false},
		{items[0].Key(), 300, true},
		{items[1].Key(), 100, true},
	}
	if len(got) != len(want) {
		t.Fatalf("journal = %+v, want %d records", got, len(want))
	}
	for i, w := range want {
		r := got[i]
		if r.Key != w.key || r.Bytes != w.bytes || r.Evicted != w.evicted {
			t.Errorf("record %d = %+v, want key %x, bytes %d, evicted %v", i, r, w.key, w.bytes, w.evicted)
		}
		if r.Name == "" || cachepool.Key(r.Name) != r.Key {
			t.Errorf("record %d: name %q does not match key %x", i, r.Name, r.Key)
		}
		if r.Start.Before(before) || r.End.After(after) || r.End.Before(r.Start) {
			t.Errorf("record %d: times %v..%v outside %v..%v", i, r.Start, r.End, before, after)
		}
	}
	if got, _ := c.TakeJournal(nil); len(got) != 0 {
		t.Errorf("a second take = %+v, want nothing", got)
	}
	c.SetJournal(false)
	getAll(t, ctx, items, 0)
	c.SetJournal(true)
	if got, _ := c.TakeJournal(nil); len(got) != 0 {
		t.Errorf("a build with the journal off was recorded: %+v", got)
	}
}
