// Package test holds poolrun's integration tests: they start real worker
// processes (the test binary re-executes itself; TestMain calls
// engine.Init first) and check the pool from the outside.
package test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/enginehost"
	"github.com/poolrun/poolrun/internal/proctest"
)

// hooks are what the engine lends tests: options no program needs, and
// the doors package cluster uses (internal/enginehost).
var hooks = enginehost.Get[engine.Option]()

// envRole makes the test binary play a part instead of running the tests.
const envRole = "POOLRUN_TEST_ROLE"

// envStallOnce names a file: the first worker process to create it stalls
// before engine.Init, as a program whose main is busy before it serves.
const envStallOnce = "POOLRUN_TEST_STALL_ONCE"

// envDieFirst names a file: the first worker process to create it exits
// before engine.Init, as a worker killed at start (by an OOM killer, say).
// envDieAlways makes every worker do so, as a program whose start-up fails.
const (
	envDieFirst  = "POOLRUN_TEST_DIE_FIRST"
	envDieAlways = "POOLRUN_TEST_DIE_ALWAYS"
)

func TestMain(m *testing.M) {
	if os.Getenv(engine.WorkerEnv) != "" {
		if os.Getenv(envDieAlways) != "" {
			fmt.Fprintln(os.Stderr, "test worker: failing at start, as asked")
			os.Exit(3)
		}
		if path := os.Getenv(envDieFirst); path != "" {
			if f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
				f.Close()
				os.Exit(3)
			}
		}
	}
	if path := os.Getenv(envStallOnce); path != "" && os.Getenv(engine.WorkerEnv) != "" {
		if f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
			f.Close()
			time.Sleep(time.Hour) // never serves
		}
	}
	engine.Init()
	switch role := os.Getenv(envRole); role {
	case "":
		// A race-enabled program sleeps a second when it exits (the race
		// detector's atexit_sleep_ms), which would count against the tests
		// of how fast workers go; the processes the tests start skip it.
		if os.Getenv("GORACE") == "" {
			os.Setenv("GORACE", "atexit_sleep_ms=0")
		}
		os.Exit(m.Run())
	case "parent":
		os.Exit(roleParent())
	case "remote-worker":
		os.Exit(roleRemoteWorker())
	default:
		fmt.Fprintln(os.Stderr, "unknown role", role)
		os.Exit(2)
	}
}

// poll checks cond until it holds, ctx ends, or a minute passes.
func poll(ctx context.Context, what string, cond func() bool) error {
	return proctest.Poll(ctx, what, time.Millisecond, cond)
}
