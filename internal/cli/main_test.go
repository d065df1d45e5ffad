package cli

import (
	"os"
	"testing"

	"github.com/poolrun/poolrun/engine"
)

// TestMain makes the test binary its own worker: the commands under test
// run pools whose workers re-execute it.
func TestMain(m *testing.M) {
	engine.Init()
	os.Exit(m.Run())
}
