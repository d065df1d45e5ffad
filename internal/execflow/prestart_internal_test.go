//go:build linux

package execflow

import (
	"testing"

	"github.com/poolrun/poolrun/internal/prestart"
)

// TestPrestartAgrees: package prestart, which cannot import this one,
// holds the same names and values for what both read or write.
func TestPrestartAgrees(t *testing.T) {
	for _, c := range []struct {
		name        string
		here, there any
	}{
		{"slackEnv", slackEnv, prestart.SlackEnv},
		{"batchEnv", batchEnv, prestart.BatchEnv},
		{"TimerSlack", TimerSlack.Nanoseconds(), int64(prestart.TimerSlack)},
		{"StateSuffix", StateSuffix, prestart.StateSuffix},
		{"StateFile", StateFile("dir/wf.yaml"), "dir/." + "wf.yaml" + prestart.StateSuffix},
	} {
		if c.here != c.there {
			t.Errorf("%s: %v here, %v in prestart", c.name, c.here, c.there)
		}
	}
}
