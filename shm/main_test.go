package shm_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/shm"
)

// The test binary is its own child process: with envRole set it plays one of
// the roles below instead of running the tests.
const envRole = "POOLRUN_SHM_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(envRole) {
	case "":
		// A race-enabled program sleeps a second when it exits (the race
		// detector's atexit_sleep_ms), which the tests would wait for at
		// each child's end; the child processes skip it.
		if os.Getenv("GORACE") == "" {
			os.Setenv("GORACE", "atexit_sleep_ms=0")
		}
		os.Exit(m.Run())
	case "reader":
		os.Exit(roleReader())
	case "absent":
		os.Exit(roleAbsent())
	case "creator":
		os.Exit(roleCreator(false))
	case "creator-tempfile":
		os.Exit(roleCreator(true))
	case "publisher":
		os.Exit(rolePublisher())
	case "mapper":
		os.Exit(roleMapper())
	case "waiter":
		os.Exit(roleWaiter())
	case "waitloop":
		os.Exit(roleWaitLoop())
	default:
		fmt.Fprintln(os.Stderr, "unknown role", os.Getenv(envRole))
		os.Exit(2)
	}
}

// child starts the test binary in the given role with the extra files at
// descriptors 3, 4, ...; its stdin is a pipe the caller may close to stop it.
func child(t testing.TB, role string, files ...*os.File) (cmd *exec.Cmd, stdin io.WriteCloser, stdout *bufio.Reader) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(exe)
	cmd.Env = append(os.Environ(), envRole+"="+role)
	cmd.ExtraFiles = files
	cmd.Stderr = os.Stderr
	if stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, stdin, bufio.NewReader(out)
}

// expectLine reads one line from r and fails unless it starts with prefix.
func expectLine(t testing.TB, r *bufio.Reader, prefix string) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("child: reading %q line: %v", prefix, err)
	}
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, prefix) {
		t.Fatalf("child said %q, want a line starting with %q", line, prefix)
	}
	return line
}

// testSet is the set with the given id that the torn-read test publishes:
// ids 1 and 2 are two different full sets of 1000 keys, higher ids sets of
// varying length. Each key carries its set's id in its high 32 bits, so a
// reader can tell from any snapshot which set it must be.
func testSet(id uint64) []uint64 {
	n := 1000
	if id > 2 {
		n = int(id*37) % 1001
	}
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = id<<32 | uint64(i+1)*7919
	}
	return keys
}

// checkTestSet reports why keys is not exactly one of the test sets.
func checkTestSet(keys []uint64) error {
	if len(keys) == 0 {
		return nil // the initial set, and the sets whose length is 0
	}
	id := keys[0] >> 32
	want := testSet(id)
	if len(keys) != len(want) {
		return fmt.Errorf("snapshot has %d keys, set %d has %d", len(keys), id, len(want))
	}
	for i := range keys {
		if keys[i] != want[i] {
			return fmt.Errorf("key %d is %#x, set %d has %#x there", i, keys[i], id, want[i])
		}
	}
	return nil
}

// roleReader maps the window at descriptor 3 and snapshots it in a loop
// until its stdin closes, checking every snapshot.
func roleReader() int {
	w, err := shm.Open(os.NewFile(3, "window"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "reader:", err)
		return 1
	}
	defer w.Close()
	// The writer is the test process, which the scheduler may pause in the
	// middle of a publish for as long as the machine is busy: this test is
	// about torn reads, not stalls (TestWriterStalled), so no pause may
	// pass for a stalled writer.
	w.SetStallTimeout(time.Hour)
	var stop atomic.Bool
	go func() { io.Copy(io.Discard, os.Stdin); stop.Store(true) }()
	fmt.Println("ready")
	var (
		buf       []uint64
		snapshots int
		gens      = map[uint64]bool{}
	)
	for !stop.Load() {
		s, err := w.Snapshot(buf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "reader: snapshot:", err)
			return 1
		}
		if err := checkTestSet(s.Keys); err != nil {
			fmt.Fprintf(os.Stderr, "reader: torn read at generation %d: %v\n", s.Gen, err)
			return 1
		}
		if s.Gen%2 != 0 {
			fmt.Fprintf(os.Stderr, "reader: odd generation %d\n", s.Gen)
			return 1
		}
		if !gens[s.Gen] {
			gens[s.Gen] = true
			if len(gens) == tornReadGens {
				fmt.Println("seen") // the writer may stop
			}
		}
		buf = s.Keys
		snapshots++
	}
	fmt.Printf("snapshots=%d retries=%d generations=%d\n", snapshots, w.Retries(), len(gens))
	return 0
}

// roleAbsent is roleReader for AppendAbsent: it looks probes, keys of
// several of the test sets, up in the window at descriptor 3, and checks
// that the keys found absent are those of exactly one published set.
func roleAbsent() int {
	w, err := shm.Open(os.NewFile(3, "window"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "absent:", err)
		return 1
	}
	defer w.Close()
	w.SetStallTimeout(time.Hour) // as in roleReader
	var probes []uint64
	for _, id := range []uint64{1, 2, 50} {
		set := testSet(id)
		probes = append(probes, set[0], set[len(set)/2], set[len(set)-1])
	}
	// The answers one set can give: a mask of the probes it lacks.
	mask := func(absent []uint64) (m uint64) {
		for _, k := range absent {
			m |= 1 << slices.Index(probes, k)
		}
		return m
	}
	valid := map[uint64]bool{mask(probes): true} // the empty sets
	for id := range uint64(100) {
		set := testSet(id + 1)
		var absent []uint64
		for _, k := range probes {
			if _, ok := slices.BinarySearch(set, k); !ok {
				absent = append(absent, k)
			}
		}
		valid[mask(absent)] = true
	}
	var stop atomic.Bool
	go func() { io.Copy(io.Discard, os.Stdin); stop.Store(true) }()
	fmt.Println("ready")
	var (
		buf     = make([]uint64, 0, len(probes))
		lookups int
		gens    = map[uint64]bool{}
	)
	for !stop.Load() {
		absent, gen, err := w.AppendAbsent(buf[:0], probes)
		if err != nil {
			fmt.Fprintln(os.Stderr, "absent:", err)
			return 1
		}
		if !valid[mask(absent)] {
			fmt.Fprintf(os.Stderr, "absent: torn read at generation %d: %#x absent\n", gen, absent)
			return 1
		}
		if gen%2 != 0 {
			fmt.Fprintf(os.Stderr, "absent: odd generation %d\n", gen)
			return 1
		}
		if !gens[gen] {
			gens[gen] = true
			if len(gens) == tornReadGens {
				fmt.Println("seen") // the writer may stop
			}
		}
		lookups++
	}
	fmt.Printf("lookups=%d retries=%d generations=%d\n", lookups, w.Retries(), len(gens))
	return 0
}

// tornReadGens is the number of distinct generations the reader of
// TestTornRead must see while the writer publishes.
const tornReadGens = 1000

// roleCreator creates a window, says so, and waits to be killed.
func roleCreator(tempFile bool) int {
	create := shm.Create
	if tempFile {
		create = shm.CreateWithTempFile
	}
	w, err := create(0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "creator:", err)
		return 1
	}
	if _, err := w.Publish([]uint64{1, 2, 3}); err != nil {
		fmt.Fprintln(os.Stderr, "creator:", err)
		return 1
	}
	fmt.Println("ready")
	time.Sleep(time.Minute)
	return 1
}

// rolePublisher creates a window, tells the parent its descriptor (which the
// parent opens through /proc), and publishes one of two full sets every
// 100 µs until its stdin closes.
func rolePublisher() int {
	w, err := shm.Create(0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "publisher:", err)
		return 1
	}
	var stop atomic.Bool
	go func() { io.Copy(io.Discard, os.Stdin); stop.Store(true) }()
	a, b := testSet(1), testSet(2)
	w.Publish(a)
	fmt.Printf("fd=%d\n", w.File().Fd())
	n := 0
	next := time.Now()
	for !stop.Load() {
		set := a
		if n%2 == 1 {
			set = b
		}
		if _, err := w.Publish(set); err != nil {
			fmt.Fprintln(os.Stderr, "publisher:", err)
			return 1
		}
		n++
		next = next.Add(100 * time.Microsecond)
		time.Sleep(time.Until(next))
	}
	return 0
}

// roleMapper maps the window at descriptor 3 and closes the descriptor, as a
// poolrun worker does, says so, and waits for its stdin to close.
func roleMapper() int {
	f := os.NewFile(3, "window")
	w, err := shm.Open(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mapper:", err)
		return 1
	}
	defer w.Close()
	f.Close()
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// roleWaiter maps the window at descriptor 3 and runs the commands it reads
// on stdin, one a line, until stdin closes:
//
//	wait GEN TIMEOUT N
//
// starts N goroutines that each call WaitGen(GEN, now+TIMEOUT) (no deadline
// when TIMEOUT is 0) and answers "waiting" once each is in WaitGen (or has
// returned from it), then one line for each return,
//
//	woke gen=G err=E at=UNIXNANO waited=NS
//
// where E is ok, deadline, closed or the error, and finally
//
//	done cpu=NS signals=N
//
// with the CPU time (user and system) the process used meanwhile and the
// number of SIGUSR1 signals it received, which it ignores.
func roleWaiter() int {
	w, err := shm.Open(os.NewFile(3, "window"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "waiter:", err)
		return 1
	}
	defer w.Close()
	var signals atomic.Int64
	sig := make(chan os.Signal, 16)
	signal.Notify(sig, syscall.SIGUSR1)
	go func() {
		for range sig {
			signals.Add(1)
		}
	}()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var (
			gen     uint64
			timeout time.Duration
			n       int
			tstr    string
		)
		if _, err := fmt.Sscanf(in.Text(), "wait %d %s %d", &gen, &tstr, &n); err != nil {
			fmt.Fprintf(os.Stderr, "waiter: command %q: %v\n", in.Text(), err)
			return 1
		}
		if timeout, err = time.ParseDuration(tstr); err != nil {
			fmt.Fprintf(os.Stderr, "waiter: command %q: %v\n", in.Text(), err)
			return 1
		}
		cpu0 := cpuTime()
		signals.Store(0)
		start := time.Now()
		var deadline time.Time
		if timeout > 0 {
			deadline = start.Add(timeout)
		}
		lines := make(chan string, n)
		for range n {
			go func() {
				g, err := w.WaitGen(gen, deadline)
				at := time.Now()
				lines <- fmt.Sprintf("woke gen=%d err=%s at=%d waited=%d", g, errWord(err), at.UnixNano(), at.Sub(start))
			}()
		}
		for limit := time.Now().Add(10 * time.Second); shm.Waiting(w)+int64(len(lines)) < int64(n); time.Sleep(100 * time.Microsecond) {
			if time.Now().After(limit) {
				fmt.Fprintf(os.Stderr, "waiter: %d of %d goroutines in WaitGen after 10 s\n", shm.Waiting(w)+int64(len(lines)), n)
				return 1
			}
		}
		fmt.Println("waiting")
		for range n {
			fmt.Println(<-lines)
		}
		fmt.Printf("done cpu=%d signals=%d\n", cpuTime()-cpu0, signals.Load())
	}
	return 0
}

// errWord names err in one word for roleWaiter's answers.
func errWord(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, shm.ErrDeadline):
		return "deadline"
	case errors.Is(err, shm.ErrClosed):
		return "closed"
	}
	return strings.ReplaceAll(err.Error(), " ", "_")
}

// cpuTime returns the CPU time, user and system, that this process used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// roleWaitLoop maps the window at descriptor 3, says "ready", and waits for
// every change of the generation, without a deadline, until stdin closes.
func roleWaitLoop() int {
	w, err := shm.Open(os.NewFile(3, "window"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "waitloop:", err)
		return 1
	}
	go func() { io.Copy(io.Discard, os.Stdin); os.Exit(0) }()
	fmt.Println("ready")
	last := w.Gen()
	for {
		if last, err = w.WaitGen(last+1, time.Time{}); err != nil {
			fmt.Fprintln(os.Stderr, "waitloop:", err)
			return 1
		}
	}
}
