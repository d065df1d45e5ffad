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

	"github.com/poolrun/poolrun/shm"

	"github.com/poolrun/poolrun/cluster/hub"
)

// The test binary as the window side of a host agent in
// BenchmarkAgentWindowSeen: it joins the pool's server with the join file
// $POOLRUN_AGENTWIN_JOIN, reads the down stream of agent
// $POOLRUN_AGENTWIN_ID as an agent does, and puts each set (a window
// record) in its worker's window in shared memory at the pool's
// generation; it prints "ready", then "SLOT GEN UNIXNANO" for each set
// once it is in its window, where the worker reads it with an atomic
// load, until its standard input ends. It runs from init and exits there.
const (
	envAgentWinJoin = "POOLRUN_AGENTWIN_JOIN"
	envAgentWinID   = "POOLRUN_AGENTWIN_ID"
)

func init() {
	if f := os.Getenv(envAgentWinJoin); f != "" {
		if err := agentWindowSide(f, os.Getenv(envAgentWinID)); err != nil {
			fmt.Fprintln(os.Stderr, "agent window side:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

func agentWindowSide(joinFile, agent string) error {
	nc, err := Dial(joinFile)
	if err != nil {
		return err
	}
	defer nc.Close()
	out := bufio.NewWriter(os.Stdout)
	wins := map[uint64]*shm.Window{}
	defer func() {
		for _, w := range wins {
			w.Close()
		}
	}()
	down, err := newStreamReader(nc, hostSubject(agent, "down"))
	if err != nil {
		return err
	}
	defer down.Close()
	if err := nc.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out, "ready")
	out.Flush()
	go func() {
		io.Copy(io.Discard, os.Stdin)
		down.Close()
	}()
	rr := newRecordReader(down)
	for {
		kind, slot, payload, err := rr.next()
		if err != nil {
			return nil
		}
		if kind != recWin {
			continue
		}
		p, err := decodePart(payload)
		if err != nil {
			return err
		}
		w := wins[slot]
		if w == nil {
			if w, err = shm.Create(1000); err != nil {
				return err
			}
			wins[slot] = w
		}
		w.PublishAt(p.keys, p.gen)
		fmt.Fprintf(out, "%d %d %d\n", slot, p.gen, time.Now().UnixNano())
		if rr.r.Buffered() == 0 {
			out.Flush()
		}
	}
}

// BenchmarkAgentWindowSeen measures the windows of the workers behind host
// agents: the pool publishes a new required set to each of the workers
// (what the engine does when the set changes, one publish per worker; the
// sets of one agent's workers go in one message of its down stream, see
// hostwindow.go), and each
// agent's window side (a process of its own) puts each set in its worker's
// window in shared memory, noting when. One op is one such change; the
// next starts when every worker's window has it. Reported as for
// BenchmarkWindowSeen: to a worker's window (seen-p50-µs, seen-p99-µs) and
// to the last of them (all-p50-µs, all-p99-µs), by the wall clock.
func BenchmarkAgentWindowSeen(b *testing.B) {
	shapes := [][2]int{{2, 8}, {10, 100}} // agents, workers each
	if testing.Short() {
		shapes = [][2]int{{1, 2}}
	}
	for _, sh := range shapes {
		b.Run(fmt.Sprintf("agents=%d/workers=%d", sh[0], sh[0]*sh[1]), func(b *testing.B) {
			benchAgentWindowSeen(b, sh[0], sh[1])
		})
	}
}

func benchAgentWindowSeen(b *testing.B, agents, perAgent int) {
	joinFile := filepath.Join(b.TempDir(), "run.join")
	srv, err := hub.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	l, err := Listen(srv, joinFile)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	type side struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		seen  chan [2]int64 // generation, wall time in ns, per set
	}
	sides := make([]*side, agents)
	var pubs []*workerWindow
	for a := range sides {
		agent := "agent" + strconv.Itoa(a)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envAgentWinJoin+"="+joinFile, envAgentWinID+"="+agent)
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
		s := &side{cmd: cmd, stdin: stdin, seen: make(chan [2]int64, 4*perAgent)}
		sides[a] = s
		ready := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) == 1 && f[0] == "ready" {
					close(ready)
					continue
				}
				if len(f) == 3 {
					gen, err1 := strconv.ParseInt(f[1], 10, 64)
					ns, err2 := strconv.ParseInt(f[2], 10, 64)
					if err1 == nil && err2 == nil {
						s.seen <- [2]int64{gen, ns}
					}
				}
			}
			close(s.seen)
		}()
		select {
		case <-ready:
		case <-time.After(30 * time.Second):
			b.Fatalf("agent %d is not ready after 30 s", a)
		}
		h := &remoteHost{down: newSender(newStreamWriter(l.nc, hostSubject(agent, "down")))}
		defer h.down.close()
		for w := range perAgent {
			pubs = append(pubs, &workerWindow{host: h, slot: uint64(w + 1), capacity: 1000})
		}
	}
	defer func() {
		for _, s := range sides {
			s.stdin.Close()
			if err := s.cmd.Wait(); err != nil {
				b.Errorf("agent window side: %v", err)
			}
		}
	}()
	var each, all []float64 // µs
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		set := []uint64{uint64(i) + 1, uint64(i) + 2}
		for _, p := range pubs {
			p.Publish(set)
		}
		want := int64(pubs[0].Gen()) // every worker's window moves in step
		last := int64(0)
		for a, s := range sides {
			for seen := 0; seen < perAgent; {
				var x [2]int64
				var ok bool
				select {
				case x, ok = <-s.seen:
				case <-time.After(10 * time.Second):
					b.Fatalf("agent %d: %d of its workers' windows at generation %d after 10 s", a, seen, want)
				}
				if !ok {
					b.Fatalf("agent %d ended", a)
				}
				if x[0] < want {
					continue // a set of the change before, sent apart
				}
				d := x[1] - start.UnixNano()
				each = append(each, float64(d)/1e3)
				last = max(last, d)
				seen++
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

func quantile(xs []float64, q float64) float64 {
	slices.Sort(xs)
	return xs[min(len(xs)-1, int(q*float64(len(xs))))]
}
