//go:build linux

package main_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// oddTimeout bounds a run of poolrun on a file that is not a regular one.
// Each is refused at once: a regression that waits, in open(2) for a
// FIFO's writer (where neither SIGINT nor SIGTERM ends it), or that reads
// an endless device, fails its test here instead of at runTimeout.
const oddTimeout = 30 * time.Second

// maxOddRSS bounds the resident memory of a poolrun that refuses an
// endless device: far below the 1 GiB a report may hold, which a poolrun
// that read /dev/zero up to the limit would have taken.
const maxOddRSS = 256 << 20

// boundedRun is what a run of poolrunWithin left.
type boundedRun struct {
	result
	maxRSS int64 // the largest resident set, in bytes; 0 if unknown
}

// poolrunWithin runs the binary in dir with args, as poolrun does, and
// with extra as its descriptors 3 and on; a run that has not ended within
// timeout is killed and fails the test.
func poolrunWithin(t *testing.T, dir string, timeout time.Duration, extra []*os.File, args ...string) boundedRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, poolrunBin, args...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Dir = dir
	cmd.ExtraFiles = extra
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := boundedRun{result: result{stdout: out.String(), stderr: errb.String()}}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("poolrun %v did not end within %v; it printed:\n%s%s", args, timeout, r.stdout, r.stderr)
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("poolrun %v: %v", args, err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss << 10 // KiB on Linux
	}
	return r
}

// mkfifo makes a FIFO at path, which no writer ever opens.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
}

// TestOddFilesRefused: a file poolrun reads that is not a regular file is
// refused at once, with exit status 2 and a message that names it and
// says what it is, before anything runs: a FIFO that no writer opens (as
// the workflow, the scaffold's --config, the state file beside a
// workflow, a report, a worker's --join-file, a --tls-cert), an endless
// device (as the workflow, --config and a report, with no large read) and
// a directory (as the workflow).
func TestOddFilesRefused(t *testing.T) {
	const outputs = "jobs:\n  - id: a\n    run: touch a.out\n    outputs: a.out\n"
	const plain = "jobs:\n  - id: a\n    run: touch ran-a\n"
	for _, tt := range []struct {
		name  string
		files map[string]string // written in the folder, "" for a FIFO
		args  []string
		want  []string // in standard error
	}{
		{"FIFO as workflow", map[string]string{"wf.fifo": ""},
			[]string{"run", "wf.fifo"},
			[]string{"wf.fifo: is a named pipe (FIFO), not a regular file", "write the workflow to a file first"}},
		{"FIFO as --config", map[string]string{"config.fifo": ""},
			[]string{"--config", "config.fifo", "--out", "out"},
			[]string{"config.fifo: is a named pipe (FIFO), not a regular file"}},
		{"FIFO as state file", map[string]string{"wf.yaml": outputs, ".wf.yaml.poolrun-state": ""},
			[]string{"run", "wf.yaml"},
			[]string{"bad state file", ".wf.yaml.poolrun-state: is a named pipe (FIFO), not a regular file"}},
		{"FIFO as report", map[string]string{"r.json": ""},
			[]string{"report", "r.json"},
			[]string{"r.json: is a named pipe (FIFO), not a regular file"}},
		{"FIFO as --join-file", map[string]string{"run.join": ""},
			[]string{"worker", "--join-file", "run.join"},
			[]string{"--join-file run.join", "run.join: is a named pipe (FIFO), not a regular file"}},
		{"FIFO as --tls-cert", map[string]string{"wf.yaml": plain, "cert.pem": "", "key.pem": "key"},
			[]string{"run", "--listen", "127.0.0.1:0", "--join-file", "run.join", "--tls-cert", "cert.pem", "--tls-key", "key.pem", "wf.yaml"},
			[]string{"--tls-cert", "cert.pem: is a named pipe (FIFO), not a regular file"}},
		{"/dev/zero as workflow", nil,
			[]string{"run", "/dev/zero"},
			[]string{"/dev/zero: is a device, not a regular file"}},
		{"/dev/zero as --config", nil,
			[]string{"scaffold", "--config", "/dev/zero", "--out", "out"},
			[]string{"/dev/zero: is a device, not a regular file"}},
		{"/dev/zero as report", nil,
			[]string{"report", "/dev/zero", "-o", "r.html"},
			[]string{"/dev/zero: is a device, not a regular file"}},
		{"directory as workflow", map[string]string{"wf.d/wf.yaml": plain},
			[]string{"run", "wf.d"},
			[]string{"wf.d: is a directory, not a regular file"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			before := map[string]bool{}
			for name, data := range tt.files {
				path := filepath.Join(dir, name)
				before[strings.Split(name, "/")[0]] = true
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if data == "" {
					mkfifo(t, path)
				} else if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r := poolrunWithin(t, dir, oddTimeout, nil, tt.args...)
			if r.code != 2 {
				t.Errorf("exit %d, want 2\n%s", r.code, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr %q does not contain %q", r.stderr, w)
				}
			}
			if r.maxRSS > maxOddRSS {
				t.Errorf("poolrun's resident memory grew to %d MiB: it read the file", r.maxRSS>>20)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if !before[e.Name()] {
					t.Errorf("%s appeared: something ran", e.Name())
				}
			}
		})
	}
}
