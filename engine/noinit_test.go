package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
)

// noInitMain is the main of a program that forgot engine.Init: it notes
// that it started (a file in dir per process, named for its role and
// pid), then runs a pool of two worker processes, which are this program
// again and so run noInitMain too. It prints Run's error as log.Fatal
// would, and on stdout whether the error matches engine.ErrNoInit.
func noInitMain(dir string) int {
	role := "main"
	if _, ok := os.LookupEnv(engine.WorkerEnv); ok {
		role = "worker"
	}
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d", role, os.Getpid())), nil, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	p := engine.New(engine.Workers(2))
	engine.Map(p, nap, []time.Duration{0, 0, 0, 0})
	err := p.Run(context.Background())
	fmt.Printf("errors.Is(err, engine.ErrNoInit): %v\n", errors.Is(err, engine.ErrNoInit))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestNoInit runs a program whose main does not call engine.Init (this
// test binary, in noInitMain's mode) as a user would, and reads what it
// says: one error, which names engine.Init and says where it goes, matches
// ErrNoInit, and comes without a panic's stack trace, from the first
// worker, none being started again. A process started by hand with the
// worker marker set says the same itself.
func TestNoInit(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, dir string, env ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), append([]string{envNoInit + "=" + dir, "GORACE=atexit_sleep_ms=0"}, env...)...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return o.String(), e.String(), cmd.ProcessState.ExitCode()
	}
	noTrace := func(t *testing.T, out string) {
		t.Helper()
		for _, bad := range []string{"panic:", "goroutine "} {
			if strings.Contains(out, bad) {
				t.Errorf("the output has a stack trace (%q):\n%s", bad, out)
			}
		}
	}
	saysWhere := func(t *testing.T, out string) {
		t.Helper()
		for _, want := range []string{"engine.Init", "first call in main", "before anything else", "re-executed"} {
			if !strings.Contains(out, want) {
				t.Errorf("the output does not say %q:\n%s", want, out)
			}
		}
	}

	t.Run("pool", func(t *testing.T) {
		dir := t.TempDir()
		stdout, stderr, code := run(t, dir)
		t.Logf("exit status %d; stdout:\n%sstderr:\n%s", code, stdout, stderr)
		if code != 1 {
			t.Errorf("exit status %d, want 1 (Run's error, printed)", code)
		}
		if !strings.Contains(stdout, "errors.Is(err, engine.ErrNoInit): true") {
			t.Errorf("Run's error does not match engine.ErrNoInit")
		}
		combined := stdout + stderr
		noTrace(t, combined)
		saysWhere(t, combined)
		if lines := strings.Split(strings.TrimSpace(stderr), "\n"); len(lines) != 1 {
			t.Errorf("stderr has %d lines, want one: Run's error", len(lines))
		}
		workers, err := filepath.Glob(filepath.Join(dir, "worker-*"))
		if err != nil {
			t.Fatal(err)
		}
		if len(workers) == 0 || len(workers) > 2 {
			t.Errorf("%d worker processes ran main, want 1 or 2: the pool's two, none started again", len(workers))
		}
	})

	t.Run("by hand", func(t *testing.T) {
		stdout, stderr, code := run(t, t.TempDir(), engine.WorkerEnv+"=1")
		if code != 78 {
			t.Errorf("exit status %d, want 78", code)
		}
		noTrace(t, stdout+stderr)
		saysWhere(t, stderr)
		if !strings.Contains(stderr, "unset "+engine.WorkerEnv) {
			t.Errorf("stderr does not say to unset %s:\n%s", engine.WorkerEnv, stderr)
		}
	})
}

// makesPool is a job that makes a pool, in the worker that serves it.
var makesPool = engine.Register("engine_test.makesPool", func(ctx context.Context, _ struct{}) (struct{}, error) {
	engine.New(engine.Workers(0))
	return struct{}{}, nil
})

// TestNewInServingWorker: New in a worker process that serves (its main
// called engine.Init) is not taken for a main that skipped Init.
func TestNewInServingWorker(t *testing.T) {
	p := engine.New(engine.Workers(1))
	j := engine.Queue(p, makesPool, struct{}{})
	if err := p.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := j.Result(); err != nil {
		t.Errorf("the job: %v", err)
	}
}
