package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// benchArgs run poolrun bench on a tiny scaffold with two workers.
var benchArgs = []string{"bench", "-j", "2", "--scale", "0.02", "--quiet"}

func TestBenchTable(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := Main(context.Background(), benchArgs, &stdout, &stderr); err != nil {
		t.Fatalf("poolrun bench: %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	t.Logf("poolrun %s:\n%s", strings.Join(benchArgs, " "), out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d lines, want a header, 3 policies and 2 notes", len(lines))
	}
	if h := strings.Fields(lines[0]); !strings.HasPrefix(lines[0], "policy") || h[len(h)-1] != "checksum" {
		t.Errorf("header %q", lines[0])
	}
	var sum string
	for i, pol := range []string{"stale", "never", "each-job"} {
		f := strings.Fields(lines[1+i])
		if len(f) == 0 || f[0] != pol {
			t.Errorf("row %d is %q, want policy %s", i+1, lines[1+i], pol)
			continue
		}
		if i == 0 {
			sum = f[len(f)-1]
		} else if f[len(f)-1] != sum {
			t.Errorf("%s: checksum %s, stale's is %s", pol, f[len(f)-1], sum)
		}
	}
	if want := "checksums agree: " + sum + " "; !strings.HasPrefix(lines[5], want) {
		t.Errorf("last line %q, want it to start with %q", lines[5], want)
	}
	if stderr.Len() > 0 {
		t.Errorf("--quiet, yet standard error has:\n%s", stderr.String())
	}
}

func TestBenchJSON(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, "report.json")
	var stdout, stderr bytes.Buffer
	args := slices.Concat(benchArgs, []string{"--json", "--repeat", "2", "--out", dir, "--report", report})
	if err := Main(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("poolrun bench: %v\n%s", err, stderr.String())
	}
	var res benchResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout.String())
	}
	if saved, err := os.ReadFile(report); err != nil || !bytes.Equal(saved, stdout.Bytes()) {
		t.Errorf("--report file differs from the --json output (%v)", err)
	}
	if !res.ChecksumsAgree || len(res.Checksum) != 16 {
		t.Errorf("checksums agree: %v, checksum %q", res.ChecksumsAgree, res.Checksum)
	}
	by := map[string]*benchPolicy{}
	for _, bp := range res.Policies {
		by[bp.Policy] = bp
		if len(bp.Runs) != 2 {
			t.Fatalf("%s: %d runs, want 2", bp.Policy, len(bp.Runs))
		}
		for i, r := range bp.Runs {
			if r.Checksum != res.Checksum {
				t.Errorf("%s run %d: checksum %s, want %s", bp.Policy, i+1, r.Checksum, res.Checksum)
			}
			if len(r.Workers) != 2 || len(r.WorkerPeakBytes) != 2 {
				t.Errorf("%s run %d: %d workers, %d peaks; want 2", bp.Policy, i+1, len(r.Workers), len(r.WorkerPeakBytes))
			}
			if r.Builds == 0 || r.Evictions != r.Builds {
				t.Errorf("%s run %d: %v builds, %v evictions; want as many evictions as builds, at least one",
					bp.Policy, i+1, r.Builds, r.Evictions)
			}
		}
		if bp.Min.WallSeconds > bp.Median.WallSeconds || bp.Median.WallSeconds > bp.Max.WallSeconds {
			t.Errorf("%s: wall times min %v, median %v, max %v", bp.Policy, bp.Min.WallSeconds, bp.Median.WallSeconds, bp.Max.WallSeconds)
		}
		if _, err := os.Stat(filepath.Join(dir, bp.Policy, "placement")); err != nil {
			t.Errorf("--out: %v", err)
		}
	}
	stale, never, each := by["stale"], by["never"], by["each-job"]
	if stale == nil || never == nil || each == nil {
		t.Fatalf("policies %v, want stale, never and each-job", res.Policies)
	}
	for i := range 2 {
		s, n, e := stale.Runs[i], never.Runs[i], each.Runs[i]
		// Under each-job every job builds what it needs: the
		// configuration, and for a connection job its index, whose build
		// gets the configuration the job built first (the only hit). So
		// a connection job makes 2 builds and 1 hit, a placement job 1
		// build: fewer hits than half the builds.
		if s.Builds > e.Builds || e.Hits == 0 || 2*e.Hits >= e.Builds {
			t.Errorf("run %d: stale built %v, each-job %v (with %v hits); want stale <= each-job, a hit per connection job", i+1, s.Builds, e.Builds, e.Hits)
		}
		// Under never a worker frees nothing before the end, so its peak
		// is the sum of all it built; and both workers run connection jobs
		// of every rule, so both build every index under both policies.
		if s.PeakBytes > n.PeakBytes {
			t.Errorf("run %d: stale's peak %v bytes, never's %v; want stale <= never", i+1, s.PeakBytes, n.PeakBytes)
		}
	}
}

func TestBenchBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--repeat", "0"},
		{"bench", "--scale", "0"},
		{"bench", "-j", "0"},
		{"bench", "extra"},
		{"bench", "--config", filepath.Join(t.TempDir(), "missing.yaml")},
	} {
		var stdout, stderr bytes.Buffer
		if err := Main(context.Background(), args, &stdout, &stderr); ExitCode(err) != ExitBadInput {
			t.Errorf("poolrun %s: %v (exit %d), want exit %d", strings.Join(args, " "), err, ExitCode(err), ExitBadInput)
		}
	}
}

func TestBenchHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := Main(context.Background(), []string{"bench", "--help"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Usage: poolrun bench", "Example:", "poolrun bench -j 2", "-repeat"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, stdout.String())
		}
	}
}
