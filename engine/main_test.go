package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/enginehost"
)

// hooks are what the engine lends tests: options no program needs, and
// the doors package cluster uses (internal/enginehost).
var hooks = enginehost.Get[engine.Option]()

// The test binary is its own worker: TestMain calls engine.Init first, so
// that the pools of the tests that start worker processes re-execute it.
// Environment variables make those workers fail as the tests need.
const (
	// envDieAtStart names a file: while it exists, a worker process
	// prints dieAtStartLine on its stderr and exits with status 3 before
	// engine.Init, as a program whose start-up fails.
	envDieAtStart = "POOLRUN_ENGINE_TEST_DIE_AT_START"
	// envDieOnUSR1 makes a worker process, on SIGUSR1, print
	// dieOnUSR1Line on its stderr and exit with status 4: a worker that
	// dies after its handshake.
	envDieOnUSR1 = "POOLRUN_ENGINE_TEST_DIE_ON_USR1"
	// envNoInit names a folder: the test binary, parent and workers
	// alike, is then a program whose main does not call engine.Init
	// (noInitMain), as a library user's that forgot it.
	envNoInit = "POOLRUN_ENGINE_TEST_NO_INIT"
)

const (
	dieAtStartLine = "engine test worker: failing at start, as asked"
	dieOnUSR1Line  = "engine test worker: dying after the handshake, as asked"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envNoInit); dir != "" {
		os.Exit(noInitMain(dir))
	}
	if os.Getenv(engine.EnvWindowPublisher) != "" {
		os.Exit(engine.WindowPublisherMain())
	}
	if os.Getenv(engine.WorkerEnv) != "" {
		if path := os.Getenv(envDieAtStart); path != "" {
			if _, err := os.Stat(path); err == nil {
				fmt.Fprintln(os.Stderr, dieAtStartLine)
				os.Exit(3)
			}
		}
		if os.Getenv(envDieOnUSR1) != "" {
			usr1 := make(chan os.Signal, 1)
			signal.Notify(usr1, syscall.SIGUSR1)
			go func() {
				<-usr1
				fmt.Fprintln(os.Stderr, dieOnUSR1Line)
				os.Exit(4)
			}()
		}
	}
	engine.Init()
	// A race-enabled program sleeps a second when it exits (the race
	// detector's atexit_sleep_ms), which every pool's end would wait for;
	// the worker processes skip it.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}

// nap is a job that takes d.
var nap = engine.Register("engine_test.nap", func(ctx context.Context, d time.Duration) (struct{}, error) {
	select {
	case <-time.After(d):
		return struct{}{}, nil
	case <-ctx.Done():
		return struct{}{}, ctx.Err()
	}
})

// gateWait is how long a waitFile job waits for its file before it fails.
const gateWait = time.Minute

// waitFile is a job that returns once the file path exists, or fails
// after gateWait: the tests open such gates when they have seen what they
// wait for.
var waitFile = engine.Register("engine_test.waitFile", func(ctx context.Context, path string) (struct{}, error) {
	deadline := time.Now().Add(gateWait)
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		if _, err := os.Stat(path); err == nil {
			return struct{}{}, nil
		}
		if time.Now().After(deadline) {
			return struct{}{}, fmt.Errorf("%s did not appear within %v", path, gateWait)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return struct{}{}, ctx.Err()
		}
	}
})

// exitWorker is a job that ends its worker process: it prints a line on
// its stderr and exits with status 5.
var exitWorker = engine.Register("engine_test.exitWorker", func(ctx context.Context, _ struct{}) (struct{}, error) {
	fmt.Fprintln(os.Stderr, "engine test job: exiting its worker, as asked")
	os.Exit(5)
	return struct{}{}, nil
})

// openGate creates the file a waitFile job waits for.
func openGate(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Error(err)
	}
}

// waitFor polls cond every few milliseconds until it holds, and fails
// with what after d.
func waitFor(d time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New(what)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// workerStarts counts the worker processes a pool started: one per place,
// and one per restart.
func workerStarts(st engine.Stats) int {
	return len(st.Workers) + st.Total().Restarts
}
