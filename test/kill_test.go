package test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/proctest"
)

// killSelf kills its own worker process with SIGKILL in the middle of a job.
var killSelf = engine.Register("test.killself", func(ctx context.Context, _ struct{}) (struct{}, error) {
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	time.Sleep(time.Minute)
	return struct{}{}, nil
})

// TestWorkerKilled: a worker killed under a job is replaced, the job is
// Aborted, and the jobs behind it run on the new worker. One worker, so
// that the others can run only there: with two, the second may end them
// all before the death is seen, and the pool then starts no other.
func TestWorkerKilled(t *testing.T) {
	p := engine.New(engine.Workers(1))
	victim := engine.Queue(p, killSelf, struct{}{})
	var rest []*engine.Job[int]
	for i := range 50 {
		rest = append(rest, engine.Queue(p, square, i))
	}
	after := engine.Queue(p, square, 100, engine.After(rest[10]))
	err := p.Run(context.Background())
	if !errors.Is(err, engine.ErrWorkerDied) {
		t.Fatalf("Run() = %v, want ErrWorkerDied", err)
	}
	if victim.Status() != engine.Aborted {
		t.Errorf("the killed job is %v, want aborted", victim.Status())
	}
	if _, err := victim.Result(); !strings.Contains(fmt.Sprint(err), "signal killed") {
		t.Errorf("the aborted job's error does not say how its worker died: %v", err)
	}
	for i, j := range append(rest, after) {
		if v, err := j.Result(); err != nil || (i < 50 && v != i*i) {
			t.Errorf("job %d: %d, %v", j.ID(), v, err)
		}
	}
	if restarts := p.Stats().Total().Restarts; restarts != 1 {
		t.Errorf("%d restarts, want 1", restarts)
	}
	t.Logf("Run: %v", err)
}

// TestInterrupt cancels Run's context while a job runs: the job is aborted,
// those not started are cancelled, and every worker process is gone when Run
// returns.
func TestInterrupt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p := engine.New(engine.Workers(2))
	var long []*engine.Job[span]
	for range 2 {
		long = append(long, engine.Queue(p, stamp, time.Minute))
	}
	later := engine.Queue(p, square, 1, engine.After(long[0]))
	var pids []int
	p.Go(func(ctx context.Context) error {
		if err := poll(ctx, "both long jobs to run", func() bool {
			return long[0].Status() == engine.Running && long[1].Status() == engine.Running
		}); err != nil {
			return err
		}
		for _, w := range p.Stats().Workers {
			pids = append(pids, w.PID)
		}
		cancel()
		return nil
	})
	start := time.Now()
	err := p.Run(ctx)
	elapsed := time.Since(start)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run() = %v, want context.Canceled", err)
	}
	if elapsed > 10*time.Second {
		t.Errorf("Run took %v after the interrupt", elapsed)
	}
	for _, j := range long {
		if j.Status() != engine.Aborted {
			t.Errorf("running job %d: %v, want aborted", j.ID(), j.Status())
		}
	}
	if later.Status() != engine.Cancelled {
		t.Errorf("job not started: %v, want cancelled", later.Status())
	}
	for _, pid := range pids {
		if proctest.Alive(pid) {
			t.Errorf("worker %d still alive after Run returned", pid)
		}
	}
}

// roleParent runs a pool whose jobs last a minute, prints its workers'
// process ids, and waits to be killed.
func roleParent() int {
	p := engine.New(engine.Workers(2))
	a := engine.Queue(p, stamp, time.Minute)
	b := engine.Queue(p, stamp, time.Minute)
	p.Go(func(ctx context.Context) error {
		if err := poll(ctx, "both jobs to run", func() bool { return a.Status() == engine.Running && b.Status() == engine.Running }); err != nil {
			return err
		}
		var pids []string
		for _, w := range p.Stats().Workers {
			pids = append(pids, strconv.Itoa(w.PID))
		}
		fmt.Println("workers", strings.Join(pids, " "))
		return nil
	})
	p.Run(context.Background())
	return 1
}

// TestParentKilled kills a pool's parent process with SIGKILL: every worker
// must be gone within a second.
func TestParentKilled(t *testing.T) {
	exe, _ := os.Executable()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envRole+"=parent")
	cmd.Stderr = os.Stderr
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("parent: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(strings.TrimPrefix(line, "workers")) {
		pid, _ := strconv.Atoi(f)
		pids = append(pids, pid)
	}
	if len(pids) != 2 {
		t.Fatalf("parent said %q", line)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	killed := time.Now()
	for _, pid := range pids {
		for proctest.Alive(pid) && time.Since(killed) < 20*time.Second {
			time.Sleep(5 * time.Millisecond)
		}
	}
	gone := time.Since(killed)
	for _, pid := range pids {
		if proctest.Alive(pid) {
			t.Errorf("worker %d outlived its parent by more than 20 s", pid)
		}
	}
	if gone > 5*time.Second {
		t.Errorf("workers outlived their killed parent by %v, want a few seconds at most", gone)
	}
	t.Logf("workers gone %v after the parent was killed", gone.Round(time.Millisecond))
}

// orphanThenDie starts a grandchild (a shell in the background, which
// sleeps), writes the grandchild's pid to the file at path, and kills its
// own worker process with SIGKILL: the grandchild is orphaned.
var orphanThenDie = engine.Register("test.orphanthendie", func(ctx context.Context, path string) (struct{}, error) {
	cmd := exec.Command("sh", "-c", "sleep 47.25 </dev/null >/dev/null 2>&1 & echo $!")
	out, err := cmd.Output()
	if err != nil {
		return struct{}{}, err
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		return struct{}{}, err
	}
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	time.Sleep(time.Minute)
	return struct{}{}, nil
})

// TestDeadWorkersProcessesEnd: when a worker dies, what its jobs started
// and left running (here an orphaned grandchild) is ended too, by the
// time Run returns.
func TestDeadWorkersProcessesEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pid")
	p := engine.New(engine.Workers(1))
	victim := engine.Queue(p, orphanThenDie, path)
	err := p.Run(context.Background())
	if !errors.Is(err, engine.ErrWorkerDied) || victim.Status() != engine.Aborted {
		t.Fatalf("Run() = %v, job %v; want the worker's death", err, victim.Status())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the job did not start its grandchild: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file: %q", b)
	}
	// The orphan was signalled before Run returned; init reaps it soon after.
	deadline := time.Now().Add(20 * time.Second)
	for proctest.Alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the dead worker's grandchild %d still runs", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
