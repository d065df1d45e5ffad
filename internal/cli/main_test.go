package cli

import (
	"fmt"
	"os"
	"testing"

	"github.com/poolrun/poolrun/cluster/hub"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/hubwire"
)

// TestMain makes the test binary its own worker: the commands under test
// run pools whose workers re-execute it.
func TestMain(m *testing.M) {
	engine.Init()
	execflow.Init() // in poolrun run's janitor: wait for its end, then exit
	// As poolrun-hub, which --listen starts: serve, then exit.
	if os.Getenv(hubwire.Env) != "" {
		if err := hub.Serve(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "test hub:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// --listen finds this binary as its poolrun-hub.
	os.Setenv(hubEnv, os.Args[0])
	// A race-enabled program sleeps a second when it exits (the race
	// detector's atexit_sleep_ms), which every pool's end would wait for;
	// the worker processes skip it.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}
