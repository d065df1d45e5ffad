package cluster

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The test binary as a window watcher of BenchmarkWindowSeen: a process
// that joins the pool's server with the join file $POOLRUN_WINDOW_JOIN and
// follows the window entry $POOLRUN_WINDOW_KEY as a remote worker does
// (kvReader), printing "ready", then "GEN UNIXNANO" for every generation it
// sees, until its standard input ends. It runs from init, before any
// TestMain, and exits there.
const (
	envWindowJoin = "POOLRUN_WINDOW_JOIN"
	envWindowKey  = "POOLRUN_WINDOW_KEY"
)

func init() {
	if f := os.Getenv(envWindowJoin); f != "" {
		if err := windowWatcher(f, os.Getenv(envWindowKey)); err != nil {
			fmt.Fprintln(os.Stderr, "window watcher:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

func windowWatcher(joinFile, key string) error {
	nc, err := Dial(joinFile)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		return err
	}
	kv, err := js.KeyValue(bucketName)
	if err != nil {
		return err
	}
	r, err := newKVReader(kv, key)
	if err != nil {
		return err
	}
	defer r.Close()
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "ready")
	out.Flush()
	ended := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(ended)
	}()
	var g uint64
	for {
		ng := r.WaitChange(g, time.Now().Add(50*time.Millisecond))
		select {
		case <-ended:
			return nil
		default:
		}
		if ng != g {
			g = ng
			fmt.Fprintf(out, "%d %d\n", g, time.Now().UnixNano())
			out.Flush()
		}
	}
}

// watcher is one window watcher process, as the benchmark sees it.
type watcher struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	seen  chan [2]int64 // generation, wall time in ns
	pub   *kvPublisher
}

// BenchmarkWindowSeen measures the window of remote workers: the pool
// publishes a new required set to each of N workers' entries (what the
// engine does when the set changes, one publish per worker), and each
// watcher process, following its entry as a worker does, notes when it
// sees the new generation. One op is one such change; the next starts when
// every watcher has seen it. Reported: the time from the start of the
// change to a worker seeing it, median and 99th percentile over workers and
// changes (seen-p50-µs, seen-p99-µs), and to the last of the N seeing it
// (all-p50-µs, all-p99-µs): the window's fan-out cost. Times cross
// processes on one host by the wall clock.
func BenchmarkWindowSeen(b *testing.B) {
	counts := []int{1, 2, 4, 8, 16}
	if testing.Short() {
		counts = []int{2}
	}
	for _, n := range counts {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) { benchWindowSeen(b, n) })
	}
}

func benchWindowSeen(b *testing.B, n int) {
	joinFile := filepath.Join(b.TempDir(), "run.join")
	l, err := Listen("127.0.0.1:0", joinFile)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ws := make([]*watcher, n)
	readies := make([]chan struct{}, n)
	for i := range ws {
		key := "w" + strconv.Itoa(i)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envWindowJoin+"="+joinFile, envWindowKey+"="+key)
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
		w := &watcher{cmd: cmd, stdin: stdin, seen: make(chan [2]int64, 16), pub: newKVPublisher(l.kv, key, 1000)}
		ws[i] = w
		ready := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				line := sc.Text()
				if line == "ready" {
					close(ready)
					continue
				}
				g, t, ok := strings.Cut(line, " ")
				gen, err1 := strconv.ParseInt(g, 10, 64)
				ns, err2 := strconv.ParseInt(t, 10, 64)
				if ok && err1 == nil && err2 == nil {
					w.seen <- [2]int64{gen, ns}
				}
			}
			close(w.seen)
		}()
		readies[i] = ready
	}
	for i, ready := range readies { // started together, waited for together
		select {
		case <-ready:
		case <-time.After(30 * time.Second):
			b.Fatalf("watcher %d is not ready after 30 s", i)
		}
	}
	defer func() {
		for _, w := range ws {
			w.stdin.Close()
			if err := w.cmd.Wait(); err != nil {
				b.Errorf("watcher: %v", err)
			}
		}
	}()
	var each, all []float64 // µs
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		set := []uint64{uint64(i) + 1, uint64(i) + 2}
		for _, w := range ws {
			w.pub.Publish(set)
		}
		last := int64(0)
		for j, w := range ws {
			want := int64(w.pub.Gen())
			for {
				var s [2]int64
				var ok bool
				select {
				case s, ok = <-w.seen:
				case <-time.After(10 * time.Second):
					b.Fatalf("watcher %d has not seen generation %d after 10 s", j, want)
				}
				if !ok {
					b.Fatalf("watcher %d ended", j)
				}
				if s[0] < want {
					continue
				}
				d := s[1] - start.UnixNano()
				each = append(each, float64(d)/1e3)
				last = max(last, d)
				break
			}
		}
		all = append(all, float64(last)/1e3)
	}
	b.StopTimer()
	b.ReportMetric(quantile(each, 0.5), "seen-p50-µs")
	b.ReportMetric(quantile(each, 0.99), "seen-p99-µs")
	b.ReportMetric(quantile(all, 0.5), "all-p50-µs")
	b.ReportMetric(quantile(all, 0.99), "all-p99-µs")
}

// quantile returns the q-quantile of xs (nearest rank); xs is sorted.
func quantile(xs []float64, q float64) float64 {
	slices.Sort(xs)
	return xs[min(len(xs)-1, int(q*float64(len(xs))))]
}
