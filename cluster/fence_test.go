package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cluster"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/proctest"
	"github.com/poolrun/poolrun/internal/spawn"
	"github.com/poolrun/poolrun/internal/workflow"
)

// The fencing tests: a workflow command whose first run goes on without
// its worker (a loop in the background, which outlives the shell that its
// worker's death kills) and whose retry writes down, as it begins, what
// became of that loop. The first run is cut off from the pool four
// ways: its worker process killed, its host's network stalled then
// healed, its agent stopped, its agent killed. Each time nothing of the
// first run may run beside the retry.

// fenceSilence is the pools' silence limit in these tests: their agents'
// leases last half of it.
const fenceSilence = 4 * time.Second

// fenceCommand is the job's command, with loop the start of a loop in
// the background that adds a line to ticks every 20 ms. Its first run
// starts the loop, writes the loop's pid to first, and waits. Its retry
// writes to verdict, in one go, what /proc says of that pid (its stat
// line, or "gone") and the size of ticks: the state of the first run's
// loop, and how far it had come, when the retry began.
func fenceCommand(loop string) string {
	return `if [ -e first ]; then
  old=$(cat first)
  { cat /proc/$old/stat 2>/dev/null || echo gone; wc -c < ticks; } > verdict.tmp && mv verdict.tmp verdict
else
  ` + loop + `
  echo $! > first.tmp && mv first.tmp first
  wait
fi`
}

// Loops for fenceCommand: one in the command's process group, and one
// that escapes it (a session of its own) but keeps its mark.
const (
	groupLoop   = `(while :; do echo t >> ticks; sleep 0.02; done) &`
	escapedLoop = `setsid sh -c 'while :; do echo t >> ticks; sleep 0.02; done' &`
)

// retryRun is a pool in this process, of no worker of its own and
// the silence limit fenceSilence, that runs the job of fenceCommand with
// one retry on the workers of agents of the test binary.
type retryRun struct {
	dir, joinFile string
	p             *engine.Pool
	job           *engine.Job[execflow.Result]
	ran           chan error // p.Run's
	loop          int        // the first run's loop, once waitLoop saw it
}

// startRetryRun starts a retryRun whose job's first run starts loop (see
// fenceCommand); the cleanups of t wait for the pool's end.
func startRetryRun(t *testing.T, loop string) *retryRun {
	t.Helper()
	r := &retryRun{dir: t.TempDir(), ran: make(chan error, 1)}
	r.joinFile = filepath.Join(r.dir, "run.join")
	l, err := listen("", r.joinFile)
	if err != nil {
		t.Fatal(err)
	}
	cluster.SetHostSilence(l, fenceSilence)
	wfFile := filepath.Join(r.dir, "wf.yaml")
	text := "jobs:\n  - id: fenced\n    retries: 1\n    run: |\n      " + strings.ReplaceAll(fenceCommand(loop), "\n", "\n      ") + "\n"
	wf, err := workflow.Parse(wfFile, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	r.p = engine.New(engine.RemoteOnly(time.Minute), l.Option())
	jobs, err := execflow.Queue(r.p, wf, execflow.Options{Dir: r.dir, Scratch: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	r.job = jobs["fenced"]
	go func() { r.ran <- r.p.Run(context.Background()) }()
	// In order: the agents go with the server, and the pool ends first.
	t.Cleanup(func() { l.Close() })
	t.Cleanup(func() {
		select {
		case <-r.ran:
		case <-time.After(30 * time.Second):
			t.Error("the pool had not ended 30 s after the test")
		}
	})
	return r
}

// startAgent starts an agent of one worker process (the test binary, as
// envJoin) for the pool of joinFile; what it says on its standard error
// goes to said. The cleanups of t continue it, kill it, and reap it.
func startAgent(t *testing.T, joinFile string, said io.Writer) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envJoin+"="+joinFile)
	cmd.Stderr = said
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Signal(syscall.SIGCONT)
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd
}

// waitLoop waits for the first run's loop, and returns its pid; a cleanup
// kills it, should it still be there.
func (r *retryRun) waitLoop(t *testing.T) int {
	t.Helper()
	first := filepath.Join(r.dir, "first")
	if err := poll(context.Background(), "the first run's loop", func() bool { return fileExists(first) }); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("first: %q", data)
	}
	if start, err := spawn.StartTime(pid); err == nil {
		t.Cleanup(func() {
			if now, err := spawn.StartTime(pid); err == nil && now == start {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		})
	}
	r.loop = pid
	return pid
}

// waitWorkers waits until the pool has n workers.
func (r *retryRun) waitWorkers(t *testing.T, n int) {
	t.Helper()
	if err := poll(context.Background(), fmt.Sprint(n, " workers"), func() bool { return len(r.p.Stats().Workers) == n }); err != nil {
		t.Fatal(err)
	}
}

// waitVerdict waits for the retry's verdict (see fenceCommand), and
// returns the state of the first run's loop then ("gone" if it was gone)
// and the size of ticks then.
func (r *retryRun) waitVerdict(t *testing.T) (state string, ticks int) {
	t.Helper()
	file := filepath.Join(r.dir, "verdict")
	if err := poll(context.Background(), "the retry's verdict", func() bool { return fileExists(file) }); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 {
		t.Fatalf("verdict: %q, want two lines", data)
	}
	if ticks, err = strconv.Atoi(strings.TrimSpace(lines[1])); err != nil {
		t.Fatalf("verdict: %q: no size of ticks", data)
	}
	state = lines[0]
	if state != "gone" {
		// The state follows the command name, in parentheses.
		f := strings.Fields(state[strings.LastIndexByte(state, ')')+1:])
		if len(f) < 1 {
			t.Fatalf("verdict: %q: no state", data)
		}
		state = f[0]
	}
	return state, ticks
}

// check checks the end of the run: the job succeeded on its retry, the
// first run's loop was in one of the states want when the retry began,
// it is gone within a while, and it added nothing to ticks after the
// retry began.
func (r *retryRun) check(t *testing.T, state string, ticks int, want ...string) {
	t.Helper()
	select {
	case err := <-r.ran:
		r.ran <- err // for the cleanup
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the pool had not ended a minute after the retry began")
	}
	if _, err := r.job.Result(); err != nil || len(r.job.Attempts()) != 2 {
		t.Errorf("the job: %v after %d attempts, want success on its retry", err, len(r.job.Attempts()))
	}
	if !slices.Contains(want, state) {
		t.Errorf("the first run's loop %d was in state %q when the retry began, want one of %q", r.loop, state, want)
	}
	if left := proctest.WaitGone([]int{r.loop}, 20*time.Second); len(left) > 0 {
		t.Errorf("the first run's loop %d is still there (state %s) 20 s after the retry began", r.loop, proctest.State(r.loop))
	}
	data, err := os.ReadFile(filepath.Join(r.dir, "ticks"))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != ticks {
		t.Errorf("the first run's loop had written %d bytes when the retry began, %d in the end: it ran beside the retry", ticks, len(data))
	}
}

// TestWorkerKilledFenced: a worker process killed (SIGKILL) under a job
// whose command left a process running (a loop in the background) is
// replaced by its agent, which kills that process before the pool hears
// of the death: when the job's retry begins, nothing of its first run
// runs.
func TestWorkerKilledFenced(t *testing.T) {
	r := startRetryRun(t, groupLoop)
	var said proctest.Buffer
	agent := startAgent(t, r.joinFile, &said)
	r.waitLoop(t)
	worker := r.p.Stats().Workers[r.job.Worker()-1].PID
	if err := syscall.Kill(worker, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	state, ticks := r.waitVerdict(t)
	r.check(t, state, ticks, "gone", "Z")
	if err := agent.Wait(); err != nil {
		t.Errorf("the agent: %v\n%s", err, said.String())
	}
}

// TestStalledHostFenced: a host whose network stalls for longer than
// the pool's silence limit, then heals, runs nothing of its jobs beside
// their retries: its agent, which hears no echo of its pings, and its
// workers stop their commands (SIGSTOP) before the pool gives the host
// up; what reaches the agent once the network heals, sent before, does
// not continue them; told that it was given up, the agent kills them and
// exits with status 1, saying why. The stall is a TCP relay between the
// agent and the pool's server, paused, then resumed.
func TestStalledHostFenced(t *testing.T) {
	t.Parallel()
	r := startRetryRun(t, groupLoop)
	j, err := cluster.ReadJoinFile(r.joinFile)
	if err != nil {
		t.Fatal(err)
	}
	relay := startRelay(t, strings.TrimPrefix(j.URL, "nats://"))
	j.URL = "nats://" + relay.addr()
	relayed := filepath.Join(r.dir, "relayed.join")
	if err := cluster.WriteJoinFile(relayed, j); err != nil {
		t.Fatal(err)
	}
	var saidA, saidB proctest.Buffer
	a := startAgent(t, relayed, &saidA)
	r.waitLoop(t)
	b := startAgent(t, r.joinFile, &saidB) // the retry's
	r.waitWorkers(t, 2)
	relay.pause()
	state, ticks := r.waitVerdict(t)
	relay.resume()
	r.check(t, state, ticks, "T", "gone", "Z")
	exitGone(t, a, &saidA)
	if err := b.Wait(); err != nil {
		t.Errorf("the other agent: %v\n%s", err, saidB.String())
	}
}

// TestStoppedAgentFenced: an agent stopped (SIGSTOP) for longer than the
// pool's silence limit runs nothing of its jobs beside their retries:
// its workers, whose lease the stopped agent does not renew, stop their
// commands before the pool gives the host up; continued, the agent hears
// that it was given up, kills them, and exits with status 1.
func TestStoppedAgentFenced(t *testing.T) {
	t.Parallel()
	r := startRetryRun(t, groupLoop)
	var saidA, saidB proctest.Buffer
	a := startAgent(t, r.joinFile, &saidA)
	r.waitLoop(t)
	b := startAgent(t, r.joinFile, &saidB) // the retry's
	r.waitWorkers(t, 2)
	if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	state, ticks := r.waitVerdict(t)
	a.Process.Signal(syscall.SIGCONT)
	r.check(t, state, ticks, "T", "gone", "Z")
	exitGone(t, a, &saidA)
	if err := b.Wait(); err != nil {
		t.Errorf("the other agent: %v\n%s", err, saidB.String())
	}
}

// TestAgentKilledFenced: a host agent killed (SIGKILL) leaves nothing of
// its workers' commands running, not even a process that left its
// command's process group (setsid): each worker, whose lease pipe ends
// with the agent, kills the processes marked as its commands.
func TestAgentKilledFenced(t *testing.T) {
	r := startRetryRun(t, escapedLoop)
	a := startAgent(t, r.joinFile, os.Stderr)
	loop := r.waitLoop(t)
	if err := a.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	a.Wait()
	if left := proctest.WaitGone([]int{loop}, 10*time.Second); len(left) > 0 {
		t.Errorf("the command's loop %d, in a session of its own, is still there (state %s) 10 s after its agent was killed", loop, proctest.State(loop))
	}
	var said proctest.Buffer
	b := startAgent(t, r.joinFile, &said) // the retry's
	state, ticks := r.waitVerdict(t)
	r.check(t, state, ticks, "gone", "Z")
	if err := b.Wait(); err != nil {
		t.Errorf("the other agent: %v\n%s", err, said.String())
	}
}

// exitGone checks that the agent cmd exits with status 1 within a while,
// saying that the pool gave its host up.
func exitGone(t *testing.T, cmd *exec.Cmd, said *proctest.Buffer) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(said.String(), "the pool gave this host up") {
			t.Errorf("the agent given up: %v, want exit status 1 saying that the pool gave its host up:\n%s", err, said.String())
		}
	case <-time.After(20 * time.Second):
		t.Errorf("the agent given up is still there 20 s after the retry began:\n%s", said.String())
	}
}

// relay is a TCP relay on loopback to an address, whose copying in both
// directions the test pauses (a network that stalls) and resumes (that
// heals).
type relay struct {
	ln     net.Listener
	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
}

// startRelay starts a relay to addr; it ends with t.
func startRelay(t *testing.T, addr string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln}
	r.cond = sync.NewCond(&r.mu)
	var conns sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			open = append(open, c, s)
			mu.Unlock()
			conns.Go(func() { r.copy(s, c) })
			conns.Go(func() { r.copy(c, s) })
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		r.resume()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		conns.Wait()
	})
	return r
}

func (r *relay) addr() string { return r.ln.Addr().String() }

// copy copies from src to dst, waiting while the relay is paused, until
// either ends.
func (r *relay) copy(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.mu.Lock()
			for r.paused {
				r.cond.Wait()
			}
			r.mu.Unlock()
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (r *relay) pause() {
	r.mu.Lock()
	r.paused = true
	r.mu.Unlock()
}

func (r *relay) resume() {
	r.mu.Lock()
	r.paused = false
	r.cond.Broadcast()
	r.mu.Unlock()
}
