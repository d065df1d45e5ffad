package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/report"
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

// TestTLSFlags: --tls-cert and --tls-key go together, with --listen, and
// name files that can be read; each mistake is refused with exit status 2
// and a message that names the flag.
func TestTLSFlags(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "pool.crt"), filepath.Join(dir, "pool.key")
	os.WriteFile(cert, []byte("x"), 0o600)
	os.WriteFile(key, []byte("x"), 0o600)
	missing := filepath.Join(dir, "missing.crt")
	join := filepath.Join(dir, "run.join")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"scaffold", "--tls-cert", cert, "--tls-key", key}, "give --listen too"},
		{[]string{"scaffold", "--listen", "127.0.0.1:0", "--join-file", join, "--tls-cert", cert}, "--tls-cert " + cert + ": give its private key with --tls-key"},
		{[]string{"run", "--listen", "127.0.0.1:0", "--join-file", join, "--tls-key", key, "wf.yaml"}, "--tls-key " + key + ": give its certificate with --tls-cert"},
		{[]string{"scaffold", "--listen", "127.0.0.1:0", "--join-file", join, "--tls-cert", missing, "--tls-key", key}, "--tls-cert: open " + missing},
		{[]string{"scaffold", "--listen", "127.0.0.1:0", "--join-file", join, "--tls-cert", cert, "--tls-key", missing}, "--tls-key: open " + missing},
		// Readable, but not a certificate: the server refuses to start.
		{[]string{"scaffold", "--scale", "0.1", "--listen", "127.0.0.1:0", "--join-file", join, "--tls-cert", cert, "--tls-key", key, "--out", dir}, "no PEM certificate"},
	} {
		err := Main(context.Background(), c.args, io.Discard, io.Discard)
		if ExitCode(err) != ExitBadInput || !strings.Contains(err.Error(), c.want) {
			t.Errorf("poolrun %q: %v (exit %d), want exit %d and %q", c.args, err, ExitCode(err), ExitBadInput, c.want)
		}
	}
	if _, err := os.Stat(join); !os.IsNotExist(err) {
		t.Errorf("a join file was written: %v", err)
	}
}

// TestWorkersByHost: the progress status counts the live workers by host,
// a local worker as this host's.
func TestWorkersByHost(t *testing.T) {
	ws := []engine.WorkerStats{
		{Index: 1, Live: true},
		{Index: 2, Live: true, Host: "zeta"},
		{Index: 3, Live: true, Host: "alpha"},
		{Index: 4, Live: false, Host: "gone"},
		{Index: 5, Live: true, Host: "zeta"},
	}
	parts := []string{"alpha 1", "zeta 2", report.HostOf(engine.WorkerStats{}) + " 1"}
	slices.Sort(parts)
	want := "workers 4 (" + strings.Join(parts, ", ") + ")"
	if n, got := workersByHost(ws); n != 4 || got != want {
		t.Errorf("workersByHost = %d, %q, want 4, %q", n, got, want)
	}
	if n, got := workersByHost(ws[3:4]); n != 0 || got != "workers 0" {
		t.Errorf("no live worker: %d, %q", n, got)
	}
}
