package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/certtest"
)

// waitFile waits up to a minute for path to exist.
func waitFile(t *testing.T, path string, out interface{ String() string }) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after a minute:\n%s", path, out)
		}
	}
}

// TestClusterOwnCert: a scaffold whose server presents a certificate given
// with --tls-cert and --tls-key, and a poolrun worker that joins through
// it (TLS on loopback, trusting the certificate the join file carries);
// the report names the worker's host, and the summary table too.
func TestClusterOwnCert(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := certtest.NewCA(t).Issue(t, dir, "pool", time.Now().Add(-time.Minute), "127.0.0.1")
	pool, out := startPoolrun(t, dir, nil, "scaffold", "--scale", "0.1", "-j", "0", "--out", "b",
		"--listen", "127.0.0.1:0", "--join-file", "run.join", "--tls-cert", cert, "--tls-key", key, "--report", "r.json")
	joinFile := filepath.Join(dir, "run.join")
	waitFile(t, joinFile, out)
	var j struct {
		URL, CA string
		Outputs []string
	}
	data, err := os.ReadFile(joinFile)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _ := os.ReadFile(cert)
	if err := json.Unmarshal(data, &j); err != nil || !strings.HasPrefix(j.URL, "tls://127.0.0.1:") || j.CA != string(certPEM) ||
		len(j.Outputs) != 1 || j.Outputs[0] != filepath.Join(dir, "b") {
		t.Errorf("join file %s (%v): want a tls:// URL, the certificate of --tls-cert and the output folder %s", data, err, filepath.Join(dir, "b"))
	}
	if w := poolrun(t, dir, "worker", "--join-file", "run.join", "-j", "1"); w.code != 0 {
		t.Errorf("poolrun worker: exit %d\n%s%s", w.code, w.stdout, w.stderr)
	}
	if err := pool.Wait(); err != nil {
		t.Fatalf("the pool: %v\n%s", err, out)
	}
	host, _ := os.Hostname()
	if line(out.String(), "checksum:") == "" || !strings.Contains(out.String(), " host ") || !strings.Contains(out.String(), host) {
		t.Errorf("want a checksum and a table with a host column naming %s:\n%s", host, out)
	}
	data, err = os.ReadFile(filepath.Join(dir, "r.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Jobs    []json.RawMessage `json:"jobs"`
		Workers []struct {
			Host string `json:"host"`
			Jobs int    `json:"jobs"`
		} `json:"workers"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Workers) != 1 || rep.Workers[0].Host != host || rep.Workers[0].Jobs != len(rep.Jobs) {
		t.Errorf("report's workers %+v: want one, on host %q, that ran the %d jobs", rep.Workers, host, len(rep.Jobs))
	}
}

// TestClusterOutputRefused: a worker that cannot write in the run's
// folder (here it is gone, as on a host that does not share it) refuses
// to join, with exit status 1 and a message that names the folder and its
// host; the pool, that no worker joined, gives up after --join-timeout.
func TestClusterOutputRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wfDir := filepath.Join(dir, "wf")
	os.Mkdir(wfDir, 0o755)
	os.WriteFile(filepath.Join(wfDir, "wf.yaml"), []byte("jobs:\n  - id: a\n    run: 'true'\n"), 0o644)
	pool, out := startPoolrun(t, dir, nil, "run", "-j", "0", "--listen", "127.0.0.1:0", "--join-file", "run.join",
		"--join-timeout", "3s", "wf/wf.yaml")
	waitFile(t, filepath.Join(dir, "run.join"), out)
	if err := os.Rename(wfDir, filepath.Join(dir, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	w := poolrun(t, dir, "worker", "--join-file", "run.join", "-j", "2")
	if w.code != 1 || !strings.Contains(w.stderr, wfDir) || !strings.Contains(w.stderr, "("+host+")") || !strings.Contains(w.stderr, "cannot write") {
		t.Errorf("poolrun worker: exit %d, want 1 and a message naming %s and host %s:\n%s", w.code, wfDir, host, w.stderr)
	}
	if err := pool.Wait(); err == nil || !strings.Contains(out.String(), "no worker") {
		t.Errorf("the pool: %v, want it to fail for want of a worker\n%s", err, out)
	}
}
