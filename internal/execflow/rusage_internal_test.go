package execflow

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
)

// TestRunShellPeakRSS checks that a command's peak resident memory is
// that of its largest process: sort holds a line of 50 MB whole. A
// command's figure is at least the test binary's own resident memory when
// it started the command (Linux counts it in ru_maxrss: see
// Result.PeakRSS), so true's is only known to be smaller than sort's.
func TestRunShellPeakRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ru_maxrss in KiB is Linux's")
	}
	const size = 50_000_000
	run := func(cmd string) int64 {
		out, err := runShell(context.Background(), shellCmd{run: cmd, dir: t.TempDir(), env: os.Environ()})
		if err != nil || out.exitCode != 0 {
			t.Fatalf("%s: %v, exit %d", cmd, err, out.exitCode)
		}
		return out.maxRSS
	}
	big := run(fmt.Sprintf("head -c %d /dev/zero | sort >/dev/null", size))
	small := run("true")
	if big < size*9/10 || small <= 0 || small >= big {
		t.Errorf("peak RSS: %d bytes with a line of %d in sort, %d with true", big, size, small)
	}
}
