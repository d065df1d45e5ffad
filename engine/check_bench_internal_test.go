package engine

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/shm"
)

// EnvWindowPublisher makes the test binary the window publisher of
// BenchmarkWorkerCheck (WindowPublisherMain) instead of running tests; its
// value is the number of live keys.
const EnvWindowPublisher = "POOLRUN_ENGINE_TEST_WINDOW_PUBLISHER"

// checkItems are the items a worker holds in BenchmarkWorkerCheck; the
// publisher's sets list the first checkListed of them.
var checkItems = func() []*cachepool.Item[int] {
	var its []*cachepool.Item[int]
	for i := range 8 {
		its = append(its, cachepool.Define(fmt.Sprint("check", i), func(context.Context) (int, error) { return i, nil }))
	}
	return its
}()

const checkListed = 5

// checkSet is variant v of the publisher's sets of live keys: the keys of
// the listed checkItems and fillers, the last of which differs by variant.
func checkSet(live int, v uint64) []uint64 {
	var keys []uint64
	for _, it := range checkItems[:checkListed] {
		keys = append(keys, it.Key())
	}
	for i := len(keys); i < live; i++ {
		keys = append(keys, uint64(i)*0x9e3779b97f4a7c15|1)
	}
	keys[len(keys)-1] += v << 1
	return keys
}

// WindowPublisherMain creates two windows, prints their descriptors, and
// publishes to each, in turn, one of two sets of $EnvWindowPublisher keys
// every 100 µs until its standard input closes.
func WindowPublisherMain() int {
	live, err := strconv.Atoi(os.Getenv(EnvWindowPublisher))
	if err != nil || live < checkListed {
		fmt.Fprintf(os.Stderr, "publisher: %s=%q\n", EnvWindowPublisher, os.Getenv(EnvWindowPublisher))
		return 2
	}
	var wins [2]*shm.Window
	for i := range wins {
		if wins[i], err = shm.Create(shm.DefaultCapacity); err != nil {
			fmt.Fprintln(os.Stderr, "publisher:", err)
			return 1
		}
	}
	// The two windows' generations never meet (4k+4 and 4k+6), so that a
	// worker that reads them in turn always finds the generation moved.
	gens := [2]uint64{4, 6}
	for i, w := range wins {
		if _, err := w.PublishAt(checkSet(live, 0), gens[i]); err != nil {
			fmt.Fprintln(os.Stderr, "publisher:", err)
			return 1
		}
	}
	var stop atomic.Bool
	go func() { io.Copy(io.Discard, os.Stdin); stop.Store(true) }()
	fmt.Printf("fds=%d,%d\n", wins[0].File().Fd(), wins[1].File().Fd())
	sets := [2][]uint64{checkSet(live, 1), checkSet(live, 0)}
	next := time.Now()
	for n := 0; !stop.Load(); n++ {
		gens[n&1] += 4
		if _, err := wins[n&1].PublishAt(sets[(n>>1)&1], gens[n&1]); err != nil {
			fmt.Fprintln(os.Stderr, "publisher:", err)
			return 1
		}
		next = next.Add(100 * time.Microsecond)
		time.Sleep(time.Until(next))
	}
	return 0
}

// openPublisher starts the test binary as a WindowPublisherMain of sets of
// live keys and maps its two windows through /proc (only a window's
// creator may publish to it). The publisher stops when b ends.
func openPublisher(b *testing.B, live int) [2]*shm.Window {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), EnvWindowPublisher+"="+strconv.Itoa(live))
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
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("publisher: %v", err)
	}
	var wins [2]*shm.Window
	fds := strings.Split(strings.TrimPrefix(strings.TrimSpace(line), "fds="), ",")
	if len(fds) != 2 {
		b.Fatalf("publisher said %q", line)
	}
	for i, fd := range fds {
		f, err := os.Open(fmt.Sprintf("/proc/%d/fd/%s", cmd.Process.Pid, fd))
		if err != nil {
			b.Skipf("cannot open the publisher's window through /proc: %v", err)
		}
		wins[i], err = shm.Open(f)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { wins[i].Close() })
	}
	return wins
}

// BenchmarkWorkerCheck times what a worker's serve loop does with the
// window before each job (runner.check: wait for the job's generation,
// decide, evict, note), for a worker that holds 8 items, of which the
// window lists 5, while another process publishes to the window every
// 100 µs. A first check, before the timing, evicts the 3 others; every
// timed check then finds the generation moved (the worker reads two such
// windows in turn) and decides in place which of its items the window
// still lists, except under "unchanged", where it reads one window and
// finds, but for the publisher's occasional publish, nothing new.
func BenchmarkWorkerCheck(b *testing.B) {
	cases := []struct {
		name      string
		live      int
		unchanged bool
	}{
		{"live=50", 50, false},
		{"live=1000", 1000, false},
		{"live=1000/unchanged", 1000, true},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			wins := openPublisher(b, tc.live)
			cache := cachepool.New()
			ctx := cachepool.WithCache(context.Background(), cache)
			for _, it := range checkItems {
				if _, err := it.Get(ctx); err != nil {
					b.Fatal(err)
				}
			}
			views := [2]windowReader{shmReader{wins[0]}, shmReader{wins[1]}}
			gens := [2]uint64{wins[0].Gen(), wins[1].Gen()} // the jobs' generations
			r := &runner{win: views[0], cache: cache, policy: EvictStale}
			if n, err := r.check(gens[0]); n != len(checkItems)-checkListed || err != nil {
				b.Fatalf("first check: %d evicted, %v; want %d", n, err, len(checkItems)-checkListed)
			}
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				if !tc.unchanged {
					i++
					r.win = views[i&1]
				}
				n, err := r.check(gens[i&1])
				if n != 0 || err != nil {
					b.Fatalf("check: %d evicted, %v", n, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/check")
			if got := cache.Stats().Resident; got != checkListed {
				b.Fatalf("%d resident, want %d", got, checkListed)
			}
		})
	}
}
