package shm_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/shm"
)

// BenchmarkSnapshot copies a full 1000-key window with an idle writer.
func BenchmarkSnapshot(b *testing.B) {
	w := create(b, shm.DefaultCapacity)
	w.Publish(testSet(1))
	r := open(b, w)
	s, _ := r.Snapshot(nil)
	b.ReportAllocs()
	for b.Loop() {
		s, _ = r.Snapshot(s.Keys)
	}
	b.ReportMetric(float64(len(s.Keys)), "keys")
}

// BenchmarkSnapshotContended copies a full window while a writer in another
// process publishes one of two different full sets every 100 µs.
func BenchmarkSnapshotContended(b *testing.B) {
	cmd, _, out := child(b, "publisher")
	line := expectLine(b, out, "fd=")
	fd, _ := strconv.Atoi(strings.TrimPrefix(line, "fd="))
	f, err := os.Open("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/fd/" + strconv.Itoa(fd))
	if err != nil {
		b.Skipf("cannot open the publisher's window through /proc: %v", err)
	}
	defer f.Close()
	r, err := shm.Open(f)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	s, _ := r.Snapshot(nil)
	g0, r0 := s.Gen, r.Retries()
	b.ReportAllocs()
	for b.Loop() {
		if s, err = r.Snapshot(s.Keys); err != nil {
			b.Fatal(err)
		}
		// A cheap check that does not allocate: both sets are full and
		// carry their id in every key's high bits.
		if k := s.Keys; len(k) != 1000 || k[0]>>32 != k[999]>>32 {
			b.Fatalf("torn snapshot at generation %d", s.Gen)
		}
	}
	b.ReportMetric(float64(r.Retries()-r0)/float64(b.N), "retries/op")
	b.ReportMetric(float64(s.Gen-g0)/2, "publishes-seen")
}

// BenchmarkPublish publishes 1000 keys, alternating two sets that differ in
// every slot, so that every publish stores every slot.
func BenchmarkPublish(b *testing.B) {
	w := create(b, shm.DefaultCapacity)
	sets := [2][]uint64{testSet(1), testSet(2)}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := w.Publish(sets[i&1]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkPublishOneChange publishes 1000 keys that differ from the
// window's set in the last key only: the common case of a pool where one
// job's completion drops one item.
func BenchmarkPublishOneChange(b *testing.B) {
	w := create(b, shm.DefaultCapacity)
	a := testSet(1)
	c := append([]uint64(nil), a...)
	c[len(c)-1]++
	sets := [2][]uint64{a, c}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		w.Publish(sets[i&1])
		i++
	}
}

// BenchmarkContains looks keys up in a 1000-key snapshot, half present.
func BenchmarkContains(b *testing.B) {
	w := create(b, shm.DefaultCapacity)
	keys := testSet(1)
	w.Publish(keys)
	s, _ := w.Snapshot(nil)
	probe := make([]uint64, 1024)
	for i := range probe {
		probe[i] = keys[(i*7)%len(keys)] + uint64(i&1) // odd i: absent
	}
	found := 0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if s.Contains(probe[i&1023]) {
			found++
		}
		i++
	}
	if found == 0 {
		b.Fatal("no key found")
	}
}
