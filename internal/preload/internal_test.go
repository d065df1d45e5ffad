package preload

import (
	"testing"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/prestart"
)

// Preloaded reports whether init began to read a workflow file that no
// Load has taken yet, and whose.
func Preloaded() (string, bool) {
	if started == nil {
		return "", false
	}
	return started.path, true
}

// TestNamesAgree: the names this package mirrors are those of the
// packages that own them.
func TestNamesAgree(t *testing.T) {
	for _, c := range []struct{ name, here, there string }{
		{"slackEnv", slackEnv, prestart.SlackEnv},
		{"workerEnv", workerEnv, engine.WorkerEnv},
		{"janitorEnv", janitorEnv, execflow.JanitorEnv},
	} {
		if c.here != c.there {
			t.Errorf("%s: %q here, %q there", c.name, c.here, c.there)
		}
	}
}
