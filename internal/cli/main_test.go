package cli

import (
	"os"
	"testing"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
)

// TestMain makes the test binary its own worker: the commands under test
// run pools whose workers re-execute it.
func TestMain(m *testing.M) {
	engine.Init()
	execflow.Init() // in poolrun run's janitor: wait for its end, then exit
	// A race-enabled program sleeps a second when it exits (the race
	// detector's atexit_sleep_ms), which every pool's end would wait for;
	// the worker processes skip it.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}
