package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cluster"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/proctest"
)

// TestJoinIDInjection: join requests whose id is not a plain token (">",
// "*", "a.b", one too long), from a client that holds the pool's token,
// are refused with a message that says why, and do the pool no harm: its
// connection stays up, its agents keep their workers, every job is right.
func TestJoinIDInjection(t *testing.T) {
	joinFile := filepath.Join(t.TempDir(), "run.join")
	l, err := cluster.Listen("", joinFile)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	agents := startAgents(t, joinFile, 1)
	p := engine.New(engine.RemoteOnly(time.Minute), l.Option())
	var jobs []*engine.Job[int]
	for i := range 200 {
		jobs = append(jobs, engine.Queue(p, slowSquare, i))
	}
	answers := map[string]string{}
	p.Go(func(ctx context.Context) error {
		if err := poll(ctx, "two workers", func() bool { return len(p.Stats().Workers) == 2 }); err != nil {
			return err
		}
		nc, err := cluster.Dial(joinFile)
		if err != nil {
			return err
		}
		defer nc.Close()
		for _, id := range []string{">", "*", "a.b", "a b", strings.Repeat("x", 65)} {
			req, _ := json.Marshal(map[string]any{"id": id, "protocol": engine.ProtocolVersion, "build": engine.Fingerprint()})
			m, err := nc.Request("poolrun.join", req, 10*time.Second)
			if err != nil {
				return fmt.Errorf("join request of id %q: %w", id, err)
			}
			answers[id] = string(m.Data)
		}
		return nil
	})
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for id, a := range answers {
		if !strings.Contains(a, "not a plain token") {
			t.Errorf("join request of id %q: answered %s, want it refused as not a plain token", id, a)
		}
	}
	if len(answers) != 5 {
		t.Errorf("%d answers, want 5", len(answers))
	}
	for i, job := range jobs {
		if v, err := job.Result(); err != nil || v != i*i {
			t.Fatalf("job %d: %d, %v", i, v, err)
		}
	}
	if n := len(p.Stats().Workers); n != 2 {
		t.Errorf("%d workers in the pool, want the agent's 2", n)
	}
	exitZero(t, "agent", agents)
}

// TestAgentKilledNoRetries: an agent killed (SIGKILL) mid-run, in a pool
// without retries: the jobs its workers ran are Aborted with
// ErrWorkerDied, every other job completes on the other agent's workers.
func TestAgentKilledNoRetries(t *testing.T) {
	l, agents := agentPool(t, 2)
	p := engine.New(engine.RemoteOnly(time.Minute), l.Option())
	var jobs []*engine.Job[int]
	for i := range 600 {
		jobs = append(jobs, engine.Queue(p, slowSquare, i))
	}
	p.Go(func(ctx context.Context) error {
		if err := poll(ctx, "four workers", func() bool { return len(p.Stats().Workers) == 4 }); err != nil {
			return err
		}
		if err := poll(ctx, "jobs done", func() bool { return jobs[100].Status().Done() }); err != nil {
			return err
		}
		return agents[1].Process.Kill()
	})
	err := p.Run(context.Background())
	if !errors.Is(err, engine.ErrWorkerDied) {
		t.Fatalf("Run: %v, want the errors of the jobs of the killed agent's workers", err)
	}
	aborted := 0
	for i, job := range jobs {
		v, err := job.Result()
		switch {
		case job.Status() == engine.Aborted && errors.Is(err, engine.ErrWorkerDied):
			aborted++
		case err != nil || v != i*i:
			t.Errorf("job %d: %v, %d, %v", i, job.Status(), v, err)
		}
	}
	// Each of its two workers had a job running, and may have had one
	// sent ahead of it.
	if aborted < 1 || aborted > 4 {
		t.Errorf("%d jobs Aborted, want those of the killed agent's 2 workers (1 to 4)", aborted)
	}
	t.Logf("%d jobs Aborted with the agent", aborted)
	agents[1].Wait()
	exitZero(t, "the agent not killed", agents[:1])
}

// TestStoppedWorkerFenced: a worker that stops (SIGSTOP) under a job, in
// a pool with retries and a short silence limit, is killed by its agent
// when the pool gives it up, so that the job's first attempt cannot run
// on beside its retry: the job succeeds on another worker, and the
// stopped worker's process is gone soon after.
func TestStoppedWorkerFenced(t *testing.T) {
	l, agents := agentPool(t, 1)
	p := engine.New(engine.RemoteOnly(time.Minute), engine.Retries(1), engine.SilenceLimit(2*time.Second), l.Option())
	mark := filepath.Join(t.TempDir(), "started")
	long := engine.Queue(p, untilCancelled, waitArg{2 * time.Second, mark})
	var mu sync.Mutex
	stopped := 0
	p.Go(func(ctx context.Context) error {
		if err := poll(ctx, "the job to start", func() bool { return fileExists(mark) }); err != nil {
			return err
		}
		os.Remove(mark) // the retry makes it again
		pid := p.Stats().Workers[long.Worker()-1].PID
		mu.Lock()
		stopped = pid
		mu.Unlock()
		return syscall.Kill(pid, syscall.SIGSTOP)
	})
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := long.Result(); err != nil || len(long.Attempts()) != 2 {
		t.Errorf("the job: %v after %d attempts, want success on its retry", err, len(long.Attempts()))
	}
	mu.Lock()
	pid := stopped
	mu.Unlock()
	if err := poll(context.Background(), fmt.Sprintf("the stopped worker %d to be gone", pid), func() bool { return !proctest.Alive(pid) }); err != nil {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Error(err)
	}
	exitZero(t, "agent", agents)
}
