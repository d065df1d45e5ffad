package cli

import (
	"testing"

	"github.com/poolrun/poolrun/internal/prestart"
)

// TestPrestartAgrees: package prestart decides on the timer slack from the
// same number of commands as runWorkflow.
func TestPrestartAgrees(t *testing.T) {
	if manyCommands != prestart.ManyCommands {
		t.Errorf("manyCommands is %d, prestart.ManyCommands %d", manyCommands, prestart.ManyCommands)
	}
}
