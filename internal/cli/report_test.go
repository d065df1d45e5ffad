package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/report"
)

// testReport is a small pool's report: one worker, two jobs.
func testReport() *report.Pool {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(s float64) *time.Time {
		t := t0.Add(time.Duration(s * float64(time.Second)))
		return &t
	}
	return &report.Pool{Version: report.Version, Command: "run wf.yaml", Started: t0, Options: report.Options{Workers: 1},
		Workers: []report.Worker{{Index: 1, PID: 11, Jobs: 2}},
		Jobs: []*report.Job{
			{ID: 1, Func: "poolrun.exec", Status: "succeeded", Worker: 1, Added: t0, Sent: at(0.1), Started: at(0.1), Ended: at(0.3)},
			{ID: 2, Func: "poolrun.exec", Status: "failed", Worker: 1, Added: t0, Sent: at(0.3), Started: at(0.3), Ended: at(0.5), Error: "exit status 1"},
		},
		Totals: report.Totals{Jobs: 2, ByStatus: map[string]int{"succeeded": 1, "failed": 1}, WallSeconds: 0.5}}
}

// poolrun report writes the page beside the report or where -o says (the
// flag before or after the file), prints its path, and answers bad input
// with exit status 2 and a message that names the file.
func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "r.json")
	if err := report.Write(in, testReport()); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args []string
		out  string
	}{
		{"beside", []string{in}, filepath.Join(dir, "r.html")},
		{"-o first", []string{"-o", filepath.Join(dir, "a.html"), in}, filepath.Join(dir, "a.html")},
		{"-o after", []string{in, "-o", filepath.Join(dir, "b.html")}, filepath.Join(dir, "b.html")},
		{"trace", []string{"--format", "trace", in}, filepath.Join(dir, "r.trace.json")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := Main(context.Background(), append([]string{"report"}, tt.args...), &stdout, &stderr); err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			if strings.TrimSpace(stdout.String()) != tt.out {
				t.Errorf("printed %q, want %q", stdout.String(), tt.out)
			}
			page, err := os.ReadFile(tt.out)
			if err != nil {
				t.Fatal(err)
			}
			want := `<svg class="timeline"`
			if tt.name == "trace" {
				want = `"traceEvents"`
			}
			if !bytes.Contains(page, []byte(want)) {
				t.Errorf("%s does not hold %s", tt.out, want)
			}
		})
	}
	notReport := filepath.Join(dir, "wf.yaml")
	os.WriteFile(notReport, []byte("jobs: []\n"), 0o644)
	for _, tt := range []struct {
		name string
		args []string
		says string
	}{
		{"no file", nil, "want one report file"},
		{"two files", []string{in, in}, "want one report file"},
		{"missing", []string{filepath.Join(dir, "none.json")}, "none.json: no such file"},
		{"not a report", []string{notReport}, "wf.yaml: not a poolrun report"},
		{"no folder for the page", []string{"-o", filepath.Join(dir, "no", "p.html"), in}, "no folder"},
		{"page over the report", []string{"-o", in, in}, "the report itself"},
		{"unknown flag", []string{"--colour", in}, "colour"},
		{"unknown format", []string{"--format", "svg", in}, "want html or trace"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Main(context.Background(), append([]string{"report"}, tt.args...), io.Discard, io.Discard)
			if ExitCode(err) != ExitBadInput || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error %v (exit %d); want exit %d and %q", err, ExitCode(err), ExitBadInput, tt.says)
			}
		})
	}
}

// A pool run with --report samples its workers while it runs: a serial
// scaffold's report has the current version, its start, samples whose
// builds and evictions add up to the worker's counters, and each job's
// send, start and end; its page holds every job.
func TestReportOfARun(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.json")
	err := Main(context.Background(), []string{"scaffold", "--serial", "--scale", "0.02", "--quiet", "--out", filepath.Join(dir, "out"), "--report", path}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	l, err := report.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	r := l.Pool
	if r == nil || r.Version != report.Version || r.Started.IsZero() || r.SampleSeconds != 0.1 {
		t.Fatalf("report: %+v", r)
	}
	if len(r.Workers) != 1 {
		t.Fatalf("%d workers in a serial report", len(r.Workers))
	}
	w := r.Workers[0]
	if len(w.Samples) == 0 {
		t.Fatal("no samples")
	}
	var builds, evictions uint64
	last := -1.0
	for _, s := range w.Samples {
		builds += s.Builds
		evictions += s.Evictions
		if s.T < last {
			t.Errorf("samples out of order: %v after %v", s.T, last)
		}
		last = s.T
	}
	if builds != w.Cache.Builds || evictions != w.Cache.Evictions {
		t.Errorf("samples count %d builds and %d evictions; the worker %d and %d", builds, evictions, w.Cache.Builds, w.Cache.Evictions)
	}
	// Serial: the worker is this process, whose memory is known to the end.
	if end := w.Samples[len(w.Samples)-1]; end.RSS <= 0 || end.T < r.Totals.WallSeconds-0.01 {
		t.Errorf("the last sample %+v: want this process's RSS, at the end (%v s)", end, r.Totals.WallSeconds)
	}
	// Each job was sent, then began, then ended.
	for _, j := range r.Jobs {
		if j.Sent == nil || j.Started == nil || j.Ended == nil || j.Started.Before(*j.Sent) || j.Ended.Before(*j.Started) {
			t.Errorf("job %d: sent %v, started %v, ended %v; want all three, in order", j.ID, j.Sent, j.Started, j.Ended)
		}
	}
	var page bytes.Buffer
	if err := report.Render(&page, l, "r.json"); err != nil {
		t.Fatal(err)
	}
	for _, j := range r.Jobs {
		if !bytes.Contains(page.Bytes(), []byte(`<rect class="job succeeded g`)) || !bytes.Contains(page.Bytes(), []byte(`data-job="`+strconv.Itoa(j.ID)+`"`)) {
			t.Errorf("job %d is not on the page", j.ID)
		}
	}
}
