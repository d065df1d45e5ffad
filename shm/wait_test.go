package shm_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/shm"
)

// awaitSleepers waits until process pid has at least n threads asleep in
// WaitGen's futex wait, and fails after 10 s: a waiter that spins, or sleeps
// on a private futex, never shows up. Where /proc cannot tell, it returns at
// once: the caller knows its waiters are in WaitGen already (a waiterProc
// answers once they are, awaitWaiting sees those of this process), which is
// all that can be seen there.
func awaitSleepers(t testing.TB, pid, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, ok := sharedFutexSleepers(pid)
		switch {
		case !ok:
			return
		case got >= n:
			return
		case time.Now().After(deadline):
			t.Fatalf("process %d: %d threads asleep in a shared futex wait after 10 s, want %d", pid, got, n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// awaitWaiting waits until n goroutines of this process wait in WaitGen
// on w, and fails after 10 s.
func awaitWaiting(t testing.TB, w *shm.Window, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for shm.Waiting(w) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines in WaitGen after 10 s, want %d", shm.Waiting(w), n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// awaitStopped waits until n goroutines of this process have stopped in
// WaitGen, each parked in the Go scheduler or in a system call (a waiter
// that spins never stops), and fails after 10 s. A goroutine counted by
// awaitWaiting may still be on its way to the point where it sleeps.
func awaitStopped(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := stoppedInWaitGen()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines stopped in WaitGen after 10 s, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// stoppedInWaitGen counts the goroutines of this process in WaitGen that
// neither run nor wait to run, from their stack traces.
func stoppedInWaitGen() int {
	buf := make([]byte, 1<<16)
	for {
		k := runtime.Stack(buf, true)
		if k < len(buf) {
			buf = buf[:k]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	n := 0
	// Each trace begins "goroutine 7 [state]:" and ends with a blank line.
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		running := strings.Contains(header, "[running") || strings.Contains(header, "[runnable")
		if !running && strings.Contains(g, "shm.(*Window).WaitGen(") {
			n++
		}
	}
	return n
}

// A waiterProc is a child process in the "waiter" role (see roleWaiter).
type waiterProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startWaiter(t testing.TB, w *shm.Window) *waiterProc {
	t.Helper()
	cmd, in, out := child(t, "waiter", w.File())
	return &waiterProc{cmd, in, out}
}

func (p *waiterProc) pid() int { return p.cmd.Process.Pid }

// wait makes n goroutines of the child wait for generation gen, with a
// deadline timeout from now (none if 0), and returns once they are started.
func (p *waiterProc) wait(t testing.TB, gen uint64, timeout time.Duration, n int) {
	t.Helper()
	if _, err := fmt.Fprintf(p.in, "wait %d %s %d\n", gen, timeout, n); err != nil {
		t.Fatal(err)
	}
	expectLine(t, p.out, "waiting")
}

// A wakeup is what one of the child's WaitGen calls returned, and when.
type wakeup struct {
	gen    uint64
	err    string // ok, deadline, closed or the error
	at     time.Time
	waited time.Duration
}

// wakeups reads the n answers to the last wait, and the CPU time the child
// used and the signals it received meanwhile.
func (p *waiterProc) wakeups(t testing.TB, n int) (ws []wakeup, cpu time.Duration, signals int) {
	t.Helper()
	for range n {
		var (
			w      wakeup
			at, ns int64
		)
		line := expectLine(t, p.out, "woke ")
		if _, err := fmt.Sscanf(line, "woke gen=%d err=%s at=%d waited=%d", &w.gen, &w.err, &at, &ns); err != nil {
			t.Fatalf("child said %q: %v", line, err)
		}
		w.at, w.waited = time.Unix(0, at), time.Duration(ns)
		ws = append(ws, w)
	}
	line := expectLine(t, p.out, "done ")
	if _, err := fmt.Sscanf(line, "done cpu=%d signals=%d", &cpu, &signals); err != nil {
		t.Fatalf("child said %q: %v", line, err)
	}
	return ws, cpu, signals
}

// waitGen calls w.WaitGen and fails if it has not returned within 10 s.
// While it waits, each poke (if any) is called every millisecond.
func waitGen(t *testing.T, w *shm.Window, gen uint64, deadline time.Time, poke ...func()) (uint64, time.Duration, error) {
	t.Helper()
	type result struct {
		gen uint64
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		g, err := w.WaitGen(gen, deadline)
		done <- result{g, err}
	}()
	timeout := time.After(10 * time.Second)
	for {
		var tick <-chan time.Time // none without pokes
		if len(poke) > 0 {
			for _, p := range poke {
				p()
			}
			tick = time.After(time.Millisecond)
		}
		select {
		case r := <-done:
			return r.gen, time.Since(start), r.err
		case <-tick:
		case <-timeout:
			t.Fatalf("WaitGen(%d) has not returned after 10 s", gen)
			return 0, 0, nil
		}
	}
}

// closeWithin closes w and fails if Close has not returned within 10 s.
func closeWithin(t *testing.T, w *shm.Window) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- w.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close has not returned after 10 s")
	}
}

// latencies sorts ds and describes them in one line.
func latencies(ds []time.Duration) string {
	slices.Sort(ds)
	return fmt.Sprintf("min %v, median %v, max %v over %d", ds[0], ds[len(ds)/2], ds[len(ds)-1], len(ds))
}

// TestWaitGenWakesOtherProcess: a reader process asleep in WaitGen returns
// when the parent publishes, with the published generation.
func TestWaitGenWakesOtherProcess(t *testing.T) {
	w := create(t, 0)
	p := startWaiter(t, w)
	var lat []time.Duration
	for i := range 10 {
		p.wait(t, w.Gen()+2, 30*time.Second, 1)
		awaitSleepers(t, p.pid(), 1)
		start := time.Now()
		gen, err := w.Publish(seq(1+i, 3))
		if err != nil {
			t.Fatal(err)
		}
		ws, _, _ := p.wakeups(t, 1)
		if ws[0].err != "ok" || ws[0].gen != gen {
			t.Fatalf("round %d: WaitGen returned generation %d and %s, want %d and ok", i, ws[0].gen, ws[0].err, gen)
		}
		// Both clocks are the host's wall clock. Only a hang is an error:
		// the machines that run the tests are shared and noisy.
		d := ws[0].at.Sub(start)
		if d > time.Second {
			t.Errorf("round %d: the waiter returned %v after the publish began", i, d)
		}
		lat = append(lat, d)
	}
	t.Logf("publish → WaitGen returns in another process: %s", latencies(lat))
}

// TestWaitGenDeadline: with nothing published, a reader process returns at
// its deadline, not before, with ErrDeadline and the generation it waited
// from, and uses little CPU meanwhile (it sleeps, it does not spin), even
// while signals interrupt its sleep.
func TestWaitGenDeadline(t *testing.T) {
	w := create(t, 8)
	gen, _ := w.Publish([]uint64{1})
	p := startWaiter(t, w)
	const timeout = 300 * time.Millisecond
	p.wait(t, gen+2, timeout, 1)
	awaitSleepers(t, p.pid(), 1)
	for range 10 {
		p.cmd.Process.Signal(syscall.SIGUSR1)
		time.Sleep(5 * time.Millisecond)
	}
	ws, cpu, signals := p.wakeups(t, 1)
	got := ws[0]
	if got.err != "deadline" || got.gen != gen {
		t.Fatalf("WaitGen returned generation %d and %s, want %d and deadline", got.gen, got.err, gen)
	}
	if got.waited < timeout || got.waited > timeout+10*time.Second {
		t.Errorf("WaitGen returned after %v, want %v (or a little more)", got.waited, timeout)
	}
	if cpu > got.waited/2 {
		t.Errorf("the waiter used %v of CPU in %v: it spins", cpu, got.waited)
	}
	t.Logf("deadline of %v: returned after %v, %v of CPU, %d signals received", timeout, got.waited, cpu, signals)
}

// TestWaitGenAtOnce: WaitGen returns at once, whatever the deadline, when the
// generation is already there, and at once with ErrDeadline when it is not
// and the deadline has passed; on the writer's window as on a reader's.
func TestWaitGenAtOnce(t *testing.T) {
	w := create(t, 8)
	r := open(t, w)
	w.Publish([]uint64{1})
	cur, _ := w.Publish([]uint64{2})
	past := time.Now().Add(-time.Second)
	tests := []struct {
		name     string
		gen      uint64
		deadline time.Time
		want     error
	}{
		{name: "reached, no deadline", gen: cur},
		{name: "older, no deadline", gen: cur - 2},
		{name: "zero, no deadline", gen: 0},
		{name: "reached, deadline passed", gen: cur, deadline: past},
		{name: "not reached, deadline passed", gen: cur + 2, deadline: past, want: shm.ErrDeadline},
		{name: "publish begun, deadline passed", gen: cur + 1, deadline: past, want: shm.ErrDeadline},
		{name: "far ahead, deadline passed", gen: ^uint64(0), deadline: past, want: shm.ErrDeadline},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, x := range []*shm.Window{w, r} {
				g, elapsed, err := waitGen(t, x, tt.gen, tt.deadline)
				if g != cur || !errors.Is(err, tt.want) {
					t.Errorf("writer %v: WaitGen(%d) = %d, %v; want %d, %v", x.Writable(), tt.gen, g, err, cur, tt.want)
				}
				if elapsed > time.Second {
					t.Errorf("writer %v: WaitGen(%d) took %v", x.Writable(), tt.gen, elapsed)
				}
			}
		})
	}
	t.Run("short deadline", func(t *testing.T) {
		const timeout = 30 * time.Millisecond
		start := time.Now()
		g, _, err := waitGen(t, r, cur+2, start.Add(timeout))
		elapsed := time.Since(start)
		if g != cur || !errors.Is(err, shm.ErrDeadline) || elapsed < timeout {
			t.Errorf("WaitGen(%d) = %d, %v after %v; want %d, ErrDeadline after %v", cur+2, g, err, elapsed, cur, timeout)
		}
	})
}

// TestWaitGenPublishUnderWay: a sequence left odd by a publish that has
// begun is not the generation that publish makes.
func TestWaitGenPublishUnderWay(t *testing.T) {
	w := create(t, 8)
	r := open(t, w)
	gen, _ := w.Publish([]uint64{1})
	shm.BreakSeq(w) // gen+1: the next publish has begun and never ends
	if g, _, err := waitGen(t, r, gen+2, time.Now().Add(30*time.Millisecond)); g != gen+1 || !errors.Is(err, shm.ErrDeadline) {
		t.Errorf("WaitGen(%d) during a publish = %d, %v; want %d, ErrDeadline", gen+2, g, err, gen+1)
	}
	if g, _, err := waitGen(t, r, gen+1, time.Time{}); g != gen+1 || err != nil {
		t.Errorf("WaitGen(%d) = %d, %v; want %d, nil", gen+1, g, err, gen+1)
	}
}

// TestWaitGenClose: closing a window wakes the goroutines waiting on it,
// without a deadline, in this process, which return ErrClosed; those waiting
// on another window of the same file keep waiting.
func TestWaitGenClose(t *testing.T) {
	w := create(t, 8)
	r := open(t, w)
	next := w.Gen() + 2
	type result struct {
		writer bool
		err    error
	}
	results := make(chan result, 8)
	for range 4 {
		for _, x := range []*shm.Window{r, w} {
			go func() {
				_, err := x.WaitGen(next, time.Time{})
				results <- result{x.Writable(), err}
			}()
		}
	}
	awaitWaiting(t, r, 4)
	awaitSleepers(t, os.Getpid(), 4) // on the reader's window
	awaitWaiting(t, w, 4)
	for _, x := range []*shm.Window{r, w} {
		closeWithin(t, x)
		for range 4 {
			select {
			case res := <-results:
				if res.writer != x.Writable() || !errors.Is(res.err, shm.ErrClosed) {
					t.Errorf("after closing the window of writer %v: a waiter on writer %v returned %v, want one of the closed window and ErrClosed", x.Writable(), res.writer, res.err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("a waiter has not returned 10 s after Close")
			}
		}
		if _, err := x.WaitGen(0, time.Time{}); !errors.Is(err, shm.ErrClosed) {
			t.Errorf("WaitGen after Close: %v, want ErrClosed", err)
		}
	}
}

// TestWaitGenCloseRace closes windows while a goroutine is starting to wait
// on them: the waiter must return however the two interleave.
func TestWaitGenCloseRace(t *testing.T) {
	w := create(t, 8)
	for range 200 {
		r, err := shm.Open(w.File())
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := r.WaitGen(w.Gen()+2, time.Time{})
			done <- err
		}()
		closeWithin(t, r)
		select {
		case err := <-done:
			if !errors.Is(err, shm.ErrClosed) {
				t.Fatalf("WaitGen on a window closed meanwhile: %v, want ErrClosed", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a waiter has not returned 10 s after Close")
		}
	}
}

// TestWaitGenManyWaiters: one publish wakes every waiter, in three reader
// processes and in the writer's own process.
func TestWaitGenManyWaiters(t *testing.T) {
	const (
		procs   = 3
		perProc = 8
		local   = 8 // half on the writer's window, half on a reader's
	)
	w := create(t, 0)
	r := open(t, w)
	next := w.Gen() + 2
	var ps []*waiterProc
	for range procs {
		p := startWaiter(t, w)
		p.wait(t, next, 30*time.Second, perProc)
		ps = append(ps, p)
	}
	type result struct {
		gen uint64
		err error
		at  time.Time
	}
	results := make(chan result, local)
	for i := range local {
		x := []*shm.Window{w, r}[i%2]
		go func() {
			g, err := x.WaitGen(next, time.Now().Add(30*time.Second))
			results <- result{g, err, time.Now()}
		}()
	}
	for _, p := range ps {
		awaitSleepers(t, p.pid(), perProc)
	}
	awaitWaiting(t, r, local/2)
	awaitSleepers(t, os.Getpid(), local/2) // on the reader's window
	awaitWaiting(t, w, local/2)
	start := time.Now()
	gen, err := w.Publish(testSet(1))
	if err != nil {
		t.Fatal(err)
	}
	var lat []time.Duration
	for _, p := range ps {
		ws, _, _ := p.wakeups(t, perProc)
		for _, x := range ws {
			if x.err != "ok" || x.gen != gen {
				t.Errorf("process %d: WaitGen returned %d and %s, want %d and ok", p.pid(), x.gen, x.err, gen)
			}
			lat = append(lat, x.at.Sub(start))
		}
	}
	for range local {
		res := <-results
		if res.err != nil || res.gen != gen {
			t.Errorf("in the writer's process: WaitGen returned %d and %v, want %d and nil", res.gen, res.err, gen)
		}
		lat = append(lat, res.at.Sub(start))
	}
	if slices.Max(lat) > time.Second {
		t.Errorf("the last waiter returned %v after the publish began", slices.Max(lat))
	}
	t.Logf("%d waiters in %d processes, all woken by one publish: %s", procs*perProc+local, procs+1, latencies(lat))
}

// TestWaitGenSpuriousWakeups: wakes without a publish, and signals, make a
// waiter look again and sleep again, not return.
func TestWaitGenSpuriousWakeups(t *testing.T) {
	w := create(t, 8)
	p := startWaiter(t, w)
	p.wait(t, w.Gen()+2, 30*time.Second, 1)
	awaitSleepers(t, p.pid(), 1)
	for range 20 {
		shm.Wake(w)
		p.cmd.Process.Signal(syscall.SIGUSR1)
		time.Sleep(time.Millisecond)
	}
	awaitSleepers(t, p.pid(), 1) // asleep again
	gen, err := w.Publish([]uint64{5})
	if err != nil {
		t.Fatal(err)
	}
	ws, _, signals := p.wakeups(t, 1)
	if ws[0].err != "ok" || ws[0].gen != gen {
		t.Fatalf("WaitGen returned %d and %s, want %d and ok: it returned before the publish", ws[0].gen, ws[0].err, gen)
	}
	t.Logf("20 spurious wakes and %d signals received, then woken by the publish", signals)
}

// TestWaitGenNudge: a WaitGen with a long deadline returns ErrNudged, and
// the generation it read, soon after Nudge (nudged every millisecond until
// it has returned, as Nudge asks); a WaitGen that starts after the nudges sleeps
// as before, until its deadline.
func TestWaitGenNudge(t *testing.T) {
	w := create(t, 8)
	gen, _ := w.Publish([]uint64{1})
	got, _, err := waitGen(t, w, gen+2, time.Now().Add(time.Minute), w.Nudge)
	if !errors.Is(err, shm.ErrNudged) || got != gen {
		t.Errorf("a nudged WaitGen returned generation %d and %v, want %d and ErrNudged", got, err, gen)
	}
	got, _, err = waitGen(t, w, gen+2, time.Now().Add(50*time.Millisecond))
	if !errors.Is(err, shm.ErrDeadline) || got != gen {
		t.Errorf("a WaitGen after the nudges returned %d and %v, want %d and ErrDeadline", got, err, gen)
	}
}

// TestWaitGenWriterHoldsNoThread: goroutines that wait on the writer's own
// window sleep in the Go scheduler, not in a system call: none of this
// process's threads is in a futex wait for them, and a publish wakes them
// all.
func TestWaitGenWriterHoldsNoThread(t *testing.T) {
	const n = 32
	w := create(t, 8)
	next := w.Gen() + 2
	before, ok := sharedFutexSleepers(os.Getpid())
	if !ok {
		t.Skip("/proc does not show the threads' system calls here")
	}
	results := make(chan error, n)
	for range n {
		go func() {
			_, err := w.WaitGen(next, time.Now().Add(time.Minute))
			results <- err
		}()
	}
	awaitWaiting(t, w, n)
	awaitStopped(t, n)
	if got, _ := sharedFutexSleepers(os.Getpid()); got > before {
		t.Errorf("%d threads asleep in a shared futex wait with %d goroutines waiting on the writer's window, %d before", got, n, before)
	}
	if _, err := w.Publish([]uint64{1}); err != nil {
		t.Fatal(err)
	}
	for range n {
		select {
		case err := <-results:
			if err != nil {
				t.Errorf("WaitGen after the publish: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a waiter on the writer's window has not returned 10 s after the publish")
		}
	}
}
