package spawn_test

import (
	"testing"

	"github.com/poolrun/poolrun/internal/spawn"
)

// TestOwners: Marked gives each owner's pool and worker tags, with or
// without the command's number (as an older poolrun wrote them);
// OwnedByPool matches any owner of the pool, OwnedByCommands only whole
// owners, each command's alone.
func TestOwners(t *testing.T) {
	for _, c := range []struct {
		name, entry    string
		pool, commands bool // OwnedByPool("1.10"), OwnedByCommands({"1.10:2.20:7"})
	}{
		{"the command", "POOLRUN_OWNER=1.10:2.20:7", true, true},
		{"another command of the worker", "POOLRUN_OWNER=1.10:2.20:8", true, false},
		{"another worker's", "POOLRUN_OWNER=1.10:3.30:7", true, false},
		{"a number's prefix", "POOLRUN_OWNER=1.10:2.20:70", true, false},
		{"an inner run's", "POOLRUN_OWNER=1.10:2.20:7 4.40:4.40:1", true, true},
		{"no number", "POOLRUN_OWNER=1.10:2.20", true, false},
		{"another pool's", "POOLRUN_OWNER=5.50:2.20:7", false, false},
		{"another variable", "POOLRUN_OTHER=1.10:2.20:7", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := spawn.OwnedByPool("1.10")(c.entry); got != c.pool {
				t.Errorf("OwnedByPool(1.10)(%q) = %v", c.entry, got)
			}
			if got := spawn.OwnedByCommands(map[string]bool{"1.10:2.20:7": true})(c.entry); got != c.commands {
				t.Errorf("OwnedByCommands(1.10:2.20:7)(%q) = %v", c.entry, got)
			}
		})
	}
	var workers []string
	spawn.Marked("POOLRUN_OWNER=1.10:2.20:7 3.30:4.40", func(_, worker string) bool {
		workers = append(workers, worker)
		return false
	})
	if len(workers) != 2 || workers[0] != "2.20" || workers[1] != "4.40" {
		t.Errorf("Marked gave the workers %q, want 2.20 and 4.40", workers)
	}
}
