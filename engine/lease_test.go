package engine_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/enginehost"
	"github.com/poolrun/poolrun/internal/proctest"
	"github.com/poolrun/poolrun/internal/spawn"
)

// startMarked collects the garbage, then starts, in a process group of
// its own, a loop that adds a line to the file it is given every 10 ms,
// marked as a command of this worker process (spawn.OwnerEnv, as package
// execflow marks them), and returns its pid: it runs on after the job.
var startMarked = engine.Register("engine_test.start-marked", func(ctx context.Context, file string) (int, error) {
	runtime.GC() // what a worker's lease watch holds must outlive a collection
	cmd := exec.Command("sh", "-c", "while :; do echo t >> "+file+"; sleep 0.01; done")
	cmd.Env = append(os.Environ(), spawn.OwnerEnv+"="+spawn.Tag(os.Getppid())+":"+spawn.Tag(os.Getpid()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	go cmd.Wait()
	return cmd.Process.Pid, nil
})

// TestWorkerProcessLease: a worker process of StartWorkerProcess stops
// the commands of its jobs (SIGSTOP) when its lease ends, and continues
// them when a later one comes.
func TestWorkerProcessLease(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("leases are Linux's")
	}
	const lease = 2 * time.Second
	var wp enginehost.WorkerProcess
	var end time.Time
	p := engine.New(engine.RemoteOnly(time.Minute), hooks.Joiner(func(ctx context.Context, p enginehost.Pool) {
		var err error
		if wp, err = hooks.StartWorkerProcess(p.WindowCapacity(), nil, nil); err != nil {
			t.Error(err)
			return
		}
		end = time.Now().Add(lease)
		wp.Lease(end)
		if err := p.Admit(enginehost.RemoteWorker{Jobs: wp.Jobs(), Control: wp.Control(), Replies: wp.Replies(), Window: &mirror{w: wp}}); err != nil {
			t.Error(err)
		}
	}))
	ticks := filepath.Join(t.TempDir(), "ticks")
	job := engine.Queue(p, startMarked, ticks)
	p.Go(func(ctx context.Context) error {
		if err := proctest.Poll(ctx, "the job", 10*time.Millisecond, func() bool { return job.Status().Done() }); err != nil {
			return err
		}
		pid, err := job.Result()
		if err != nil {
			return err
		}
		defer syscall.Kill(pid, syscall.SIGKILL)
		if time.Now().Before(end.Add(-100*time.Millisecond)) && proctest.State(pid) == "T" {
			t.Errorf("the command %d is stopped before its worker's lease ends", pid)
		}
		if err := proctest.Poll(ctx, "the command to stop", time.Millisecond, func() bool { return proctest.State(pid) == "T" }); err != nil {
			return err
		}
		if late := time.Since(end); late < 0 {
			t.Errorf("the command was stopped %v before its worker's lease ended", -late)
		}
		size := func() int64 {
			fi, err := os.Stat(ticks)
			if err != nil {
				return 0
			}
			return fi.Size()
		}
		stopped := size()
		wp.Lease(time.Now().Add(time.Minute))
		return proctest.Poll(ctx, fmt.Sprint("the command to go on after ", stopped, " bytes"), time.Millisecond, func() bool {
			return proctest.State(pid) != "T" && size() > stopped
		})
	})
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := wp.Wait(); err != nil {
		t.Errorf("the worker process: %v", err)
	}
}
