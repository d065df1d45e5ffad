package execflow_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/proctest"
)

// TestCancel cancels a pool while a job's command sleeps, with a child of
// its own in its process group (and one that ignores SIGTERM): when Run has
// returned, no process of the command's group may be left (within a
// generous wait, for the kernel to finish the killed ones), the job is
// aborted, and no scratch folder remains.
func TestCancel(t *testing.T) {
	commands := []struct {
		name string
		run  string
	}{
		{"sleep", `echo $$ > "$LOG/pgid"; sh -c 'sleep 30' & sleep 30; wait`},
		{"ignores SIGTERM", `trap '' TERM; echo $$ > "$LOG/pgid"; sleep 30 & sleep 30; wait`},
	}
	// The modes, and poolrun run's: workers that are goroutines of this
	// process.
	type mode struct {
		name string
		opt  engine.Option
	}
	var cancelModes []mode
	for _, m := range modes {
		cancelModes = append(cancelModes, mode{m.name, engine.Workers(m.workers)})
	}
	cancelModes = append(cancelModes, mode{"2 in-process workers", engine.InProcess(2)})
	for _, c := range commands {
		for _, m := range cancelModes {
			t.Run(c.name+"/"+m.name, func(t *testing.T) {
				wf := parse(t, "cancel.yaml", `
items:
  ref:
    run: echo data > "$POOLRUN_ITEM"
jobs:
  - id: sleeper
    needs: [ref]
    run: `+c.run+`
  - id: later
    after: [sleeper]
    run: "true"
`)
				logDir, root := t.TempDir(), t.TempDir()
				p := engine.New(m.opt)
				jobs, err := execflow.Queue(p, wf, execflow.Options{
					Dir: t.TempDir(), Scratch: root, Env: []string{"LOG=" + logDir},
				})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var pgid int
				var scratchDuring []string
				p.Go(func(sctx context.Context) error {
					var err error
					pgid, err = readPID(sctx, filepath.Join(logDir, "pgid"))
					entries, _ := os.ReadDir(root)
					for _, e := range entries {
						scratchDuring = append(scratchDuring, e.Name())
					}
					cancel()
					return err
				})
				done := make(chan error, 1)
				go func() { done <- p.Run(ctx) }()
				select {
				case err = <-done:
				case <-time.After(runTimeout):
					t.Fatalf("Run did not return in %v", runTimeout)
				}
				if !errors.Is(err, context.Canceled) {
					t.Errorf("Run: %v, want context.Canceled", err)
				}
				if pgid == 0 {
					t.Fatal("the command never wrote its process group")
				}
				if st := jobs["sleeper"].Status(); st != engine.Aborted {
					t.Errorf("sleeper is %v, want aborted", st)
				}
				if st := jobs["later"].Status(); st != engine.Cancelled {
					t.Errorf("later is %v, want cancelled", st)
				}
				waitGroupGone(t, pgid)
				if len(scratchDuring) != 1 || !strings.HasPrefix(scratchDuring[0], "poolrun-") {
					t.Errorf("while the job ran, the scratch root held %q, want one scratch folder", scratchDuring)
				}
				if left := scratchLeft(t, root); len(left) > 0 {
					t.Errorf("scratch root holds %q after the run", left)
				}
			})
		}
	}
}

// TestWorkerKilled kills a worker with SIGKILL while its job runs: the
// job's shell dies with it (parent-death signal), the job is aborted, the
// worker's scratch folder stays behind, and SweepScratch removes it.
func TestWorkerKilled(t *testing.T) {
	wf := parse(t, "kill.yaml", `
items:
  ref:
    run: echo data > "$POOLRUN_ITEM"
jobs:
  - id: victim
    needs: [ref]
    run: echo $$ > "$LOG/pgid"; kill -KILL $PPID; exec sleep 30
`)
	logDir, root := t.TempDir(), t.TempDir()
	jobs, err := run(t, wf, 1, execflow.Options{Scratch: root, Env: []string{"LOG=" + logDir}})
	if !errors.Is(err, engine.ErrWorkerDied) {
		t.Errorf("Run: %v, want ErrWorkerDied", err)
	}
	if st := jobs["victim"].Status(); st != engine.Aborted {
		t.Errorf("victim is %v, want aborted", st)
	}
	pgid, err := readPID(context.Background(), filepath.Join(logDir, "pgid"))
	if err != nil {
		t.Fatal(err)
	}
	waitGroupGone(t, pgid)

	left := scratchLeft(t, root)
	if len(left) != 1 {
		t.Fatalf("scratch root holds %q, want the killed worker's folder", left)
	}
	// A live process's folder and other files are not swept.
	mine, err := os.MkdirTemp(root, "poolrun-"+itoa(os.Getpid())+"-")
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(root, "poolrun-notes")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := execflow.SweepScratch(root); err != nil {
		t.Fatal(err)
	}
	got := scratchLeft(t, root)
	want := []string{filepath.Base(mine), "poolrun-notes"}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("after SweepScratch the root holds %q, want %q", got, want)
	}
}

// TestStragglers checks that processes a command leaves running in its
// group are stopped when it ends, and that a process that left the group
// holding the command's standard error does not hold up the job, and is
// killed too (it bears the command's owner), in this process (serial
// mode) and in a worker process.
func TestStragglers(t *testing.T) {
	for _, m := range modes[:2] {
		t.Run(m.name, func(t *testing.T) { testStragglers(t, m.workers) })
	}
}

func testStragglers(t *testing.T, workers int) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid:", err)
	}
	wf := parse(t, "stragglers.yaml", `
jobs:
  - id: leaves
    run: |
      echo $$ > "$LOG/pgid"
      sleep 30 &
      setsid sh -c 'echo $$ > "$LOG/escaped.tmp"; mv "$LOG/escaped.tmp" "$LOG/escaped"; exec sleep 300' &
      while [ ! -e "$LOG/escaped" ]; do sleep 0.01; done
      echo done >&2
  - id: next
    after: [leaves]
    run: "true"
`)
	logDir := t.TempDir()
	jobs, err := run(t, wf, workers, execflow.Options{Scratch: t.TempDir(), Env: []string{"LOG=" + logDir}})
	escaped, perr := readPID(context.Background(), filepath.Join(logDir, "escaped"))
	if perr == nil {
		defer syscall.Kill(escaped, syscall.SIGKILL)
	}
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	res, err := jobs["leaves"].Result()
	if err != nil || res.Stderr != "done" {
		t.Errorf("leaves: %+v, %v", res, err)
	}
	pgid, err := readPID(context.Background(), filepath.Join(logDir, "pgid"))
	if err != nil {
		t.Fatal(err)
	}
	waitGroupGone(t, pgid)
	if perr != nil {
		t.Fatalf("the process that left the group: %v", perr)
	}
	if left := proctest.WaitGone([]int{escaped}, 30*time.Second); len(left) > 0 {
		t.Errorf("the process that left the group, %d, runs on 30 s after its command ended", escaped)
	}
}
