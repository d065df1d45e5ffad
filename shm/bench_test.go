package shm_test

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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

// BenchmarkWake is the wake-up that follows every publish that changes the
// set, with nobody waiting: one futex system call on Linux.
func BenchmarkWake(b *testing.B) {
	w := create(b, 8)
	for b.Loop() {
		shm.Wake(w)
	}
}

// BenchmarkPublishWake publishes 1000 keys that differ from the window's set
// in the last key only (as BenchmarkPublishOneChange) with nobody waiting,
// and with a reader process asleep in WaitGen before every publish, which
// the publish then wakes. Only the publishes are timed (mean and median
// ns/publish), not the wait for the reader to fall asleep again. A woken
// reader may take the publisher's processor for a while on a small machine,
// which the mean then includes.
func BenchmarkPublishWake(b *testing.B) {
	for _, bc := range []struct {
		name   string
		reader bool
	}{{"nobody-waiting", false}, {"reader-waiting", true}} {
		b.Run(bc.name, func(b *testing.B) {
			w := create(b, shm.DefaultCapacity)
			a := testSet(1)
			c := append([]uint64(nil), a...)
			c[len(c)-1]++
			sets := [2][]uint64{a, c}
			pid := 0
			if bc.reader {
				cmd, _, out := child(b, "waitloop", w.File())
				expectLine(b, out, "ready")
				pid = cmd.Process.Pid
			}
			var spent []time.Duration
			i := 0
			for b.Loop() {
				if bc.reader {
					awaitSleepers(b, pid, 1)
				}
				start := time.Now()
				if _, err := w.Publish(sets[i&1]); err != nil {
					b.Fatal(err)
				}
				spent = append(spent, time.Since(start))
				i++
			}
			var sum time.Duration
			for _, d := range spent {
				sum += d
			}
			slices.Sort(spent)
			b.ReportMetric(float64(sum.Nanoseconds())/float64(len(spent)), "ns/publish")
			b.ReportMetric(float64(spent[len(spent)/2].Nanoseconds()), "p50-ns/publish")
			b.ReportMetric(0, "ns/op") // the loop's time includes the waits for the reader
		})
	}
}

// BenchmarkWakeLatency measures how long a reader process asleep in WaitGen
// takes to return once the parent begins a publish that changes the set:
// the publish, the wake-up, the scheduling of the reader's thread. Both ends
// read the host's wall clock. It reports the mean, the median and the worst
// in microseconds; ns/op, which would include the round trip of the commands
// to the reader, is left out.
func BenchmarkWakeLatency(b *testing.B) {
	w := create(b, 8)
	p := startWaiter(b, w)
	var lat []time.Duration
	i := 0
	for b.Loop() {
		p.wait(b, w.Gen()+2, 30*time.Second, 1)
		awaitSleepers(b, p.pid(), 1)
		start := time.Now()
		gen, err := w.Publish(seq(1+i%2, 3))
		if err != nil {
			b.Fatal(err)
		}
		ws, _, _ := p.wakeups(b, 1)
		if ws[0].err != "ok" || ws[0].gen != gen {
			b.Fatalf("WaitGen returned %d and %s, want %d and ok", ws[0].gen, ws[0].err, gen)
		}
		lat = append(lat, ws[0].at.Sub(start))
		i++
	}
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	slices.Sort(lat)
	µs := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(µs(sum/time.Duration(len(lat))), "µs/wake")
	b.ReportMetric(µs(lat[len(lat)/2]), "p50-µs/wake")
	b.ReportMetric(µs(lat[len(lat)-1]), "max-µs/wake")
	b.ReportMetric(0, "ns/op")
}
