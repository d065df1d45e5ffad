package cli

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkerFlags: poolrun worker's help succeeds; a missing or bad join
// file, a -j out of range and a lone --listen are refused with exit
// status 2 and a message that names the flag.
func TestWorkerFlags(t *testing.T) {
	var out strings.Builder
	if err := Main(context.Background(), []string{"worker", "--help"}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "--join-file") {
		t.Errorf("worker --help: %v, %q", err, out.String())
	}
	missing := filepath.Join(t.TempDir(), "run.join")
	for _, args := range [][]string{
		{"worker"},
		{"worker", "--join-file", missing},
		{"worker", "--join-file", missing, "-j", "0"},
		{"run", "--listen", "127.0.0.1:0", "wf.yaml"},
		{"scaffold", "--join-file", missing},
		{"scaffold", "--listen", "nowhere", "--join-file", missing},
	} {
		err := Main(context.Background(), args, io.Discard, io.Discard)
		if ExitCode(err) != ExitBadInput || !strings.Contains(err.Error(), "-") {
			t.Errorf("poolrun %q: %v (exit %d), want exit %d and the flag named", args, err, ExitCode(err), ExitBadInput)
		}
	}
}
