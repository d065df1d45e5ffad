package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/poolrun/poolrun/shm"
)

// envKeys tells the publisher role how many keys its sets have.
const envKeys = "POOLRUN_BENCH_KEYS"

// publishEvery is how often the publisher role publishes.
const publishEvery = 100 * time.Microsecond

// BenchmarkSnapshot copies a window of k keys, which is what a worker does
// before a job when the window's generation has moved: with the writer
// idle, and while a writer in another process publishes one of two
// different k-key sets every 100 µs (the reader then retries whenever it
// overlaps a publish). It reports the retries per snapshot and, for the
// publishing writer, the publishes the reader saw.
func BenchmarkSnapshot(b *testing.B) {
	for _, k := range sizes.keys {
		b.Run(fmt.Sprintf("keys=%d/writer=idle", k), func(b *testing.B) {
			w, err := shm.Create(0)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			if _, err := w.Publish(keySet(k, 1)); err != nil {
				b.Fatal(err)
			}
			r, err := shm.Open(w.File())
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			snapshotLoop(b, r, k)
		})
		b.Run(fmt.Sprintf("keys=%d/writer=publishing", k), func(b *testing.B) {
			r := openPublisher(b, k)
			g0 := r.Gen()
			snapshotLoop(b, r, k)
			b.ReportMetric(float64(r.Gen()-g0)/2, "publishes-seen")
		})
	}
}

// snapshotLoop snapshots r b.N times, checking that every snapshot is one
// whole set of keySet.
func snapshotLoop(b *testing.B, r *shm.Window, k int) {
	s, err := r.Snapshot(nil)
	if err != nil {
		b.Fatal(err)
	}
	r0 := r.Retries()
	b.ReportAllocs()
	for b.Loop() {
		if s, err = r.Snapshot(s.Keys); err != nil {
			b.Fatal(err)
		}
		// Cheap, and allocation-free: both sets carry their id in every
		// key's high bits.
		if keys := s.Keys; len(keys) != k || keys[0]>>32 != keys[k-1]>>32 {
			b.Fatalf("torn snapshot at generation %d", s.Gen)
		}
	}
	b.ReportMetric(float64(r.Retries()-r0)/float64(b.N), "retries/op")
}

// keySet is set number id of k keys; every key carries id in its high 32
// bits. The keys are ascending, as a window holds them.
func keySet(k int, id uint64) []uint64 {
	keys := make([]uint64, k)
	for i := range keys {
		keys[i] = id<<32 | uint64(i+1)*7919
	}
	return keys
}

// openPublisher starts the test binary as a publisher of k-key sets and
// maps its window (through /proc: only the creator of a window may publish
// to it). The publisher stops when the benchmark ends.
func openPublisher(b *testing.B, k int) *shm.Window {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envRole+"=publisher", envKeys+"="+strconv.Itoa(k))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close() // the publisher's signal to stop
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("publisher: %v", err)
	}
	fd, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "fd="))
	if err != nil {
		b.Fatalf("publisher said %q", line)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/fd/%d", cmd.Process.Pid, fd))
	if err != nil {
		b.Skipf("cannot open the publisher's window through /proc: %v", err)
	}
	defer f.Close()
	r, err := shm.Open(f)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	return r
}

// rolePublisher creates a window, prints its descriptor, and publishes one
// of two different sets of $POOLRUN_BENCH_KEYS keys every publishEvery until
// its standard input closes.
func rolePublisher() int {
	k, err := strconv.Atoi(os.Getenv(envKeys))
	if err != nil || k < 1 {
		fmt.Fprintf(os.Stderr, "publisher: %s=%q\n", envKeys, os.Getenv(envKeys))
		return 2
	}
	w, err := shm.Create(max(k, shm.DefaultCapacity))
	if err != nil {
		fmt.Fprintln(os.Stderr, "publisher:", err)
		return 1
	}
	sets := [2][]uint64{keySet(k, 1), keySet(k, 2)}
	if _, err := w.Publish(sets[0]); err != nil {
		fmt.Fprintln(os.Stderr, "publisher:", err)
		return 1
	}
	var stop atomic.Bool
	go func() { io.Copy(io.Discard, os.Stdin); stop.Store(true) }()
	fmt.Printf("fd=%d\n", w.File().Fd())
	next := time.Now()
	for n := 1; !stop.Load(); n++ {
		if _, err := w.Publish(sets[n&1]); err != nil {
			fmt.Fprintln(os.Stderr, "publisher:", err)
			return 1
		}
		next = next.Add(publishEvery)
		time.Sleep(time.Until(next))
	}
	return 0
}
