package cluster

import (
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func bucket(t *testing.T, s *Server, name string) nats.KeyValue {
	t.Helper()
	js, err := connect(t, s).JetStream()
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(&nats.KeyValueConfig{Bucket: name, Storage: nats.MemoryStorage, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// TestWindow: a worker's reader sees every set its publisher publishes,
// at the publisher's generation or later; an overflow reads as one; a
// generation not published is waited for until the deadline, then not
// claimed; an unchanged set is not published again.
func TestWindow(t *testing.T) {
	s, err := Start("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pub := newKVPublisher(bucket(t, s, "w1"), "worker-1", 3)
	js, _ := connect(t, s).JetStream() // the worker's connection
	kv, err := js.KeyValue("w1")
	if err != nil {
		t.Fatal(err)
	}
	r, err := newKVReader(kv, "worker-1")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	for _, set := range [][]uint64{{3, 1, 2}, {9}, {}, {1, 2, 3, 4}, {7, 7, 8}} {
		over := pub.Publish(set)
		if over != (len(set) > 3) {
			t.Errorf("Publish(%v) over = %v", set, over)
		}
		g := pub.Gen()
		if g%2 != 0 {
			t.Errorf("generation %d is odd", g)
		}
		if !r.WaitGen(g, time.Now().Add(5*time.Second)) {
			t.Fatalf("the reader did not see generation %d", g)
		}
		snap, err := r.Snapshot(nil)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Compact(slices.Sorted(slices.Values(set)))
		if over {
			want = nil
		}
		if snap.Overflow != over || !slices.Equal(snap.Keys, want) && len(want)+len(snap.Keys) > 0 {
			t.Errorf("after Publish(%v): snapshot %+v", set, snap)
		}
	}
	n, g := pub.Publishes(), pub.Gen()
	pub.Publish([]uint64{8, 7})
	if pub.Publishes() != n || pub.Gen() != g {
		t.Errorf("an unchanged set was published again")
	}
	start := time.Now()
	if r.WaitGen(g+100, time.Now().Add(300*time.Millisecond)) {
		t.Error("a generation never published was claimed")
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 5*time.Second {
		t.Errorf("WaitGen of a generation never published returned after %v, want about 300 ms", d)
	}
}

// TestWindowLateWatch: when the watch is late (here, stopped), WaitGen
// gets the entry directly and still sees the generation in time.
func TestWindowLateWatch(t *testing.T) {
	s, err := Start("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	kv := bucket(t, s, "late")
	pub := newKVPublisher(kv, "w", 10)
	r, err := newKVReader(kv, "w")
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // the watch brings nothing from now on
	time.Sleep(50 * time.Millisecond)
	pub.Publish([]uint64{5})
	if !r.WaitGen(pub.Gen(), time.Now().Add(2*time.Second)) {
		t.Fatal("the direct get did not bring the generation")
	}
	if snap, _ := r.Snapshot(nil); !slices.Equal(snap.Keys, []uint64{5}) {
		t.Errorf("snapshot %+v, want [5]", snap)
	}
}
