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
	os.Exit(m.Run())
}
