package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReportItemsAndMemory runs a workflow with items and a command that
// holds 50 MB, with --report: the report (version 2) names every item a
// worker built, with its size, build and eviction times and why it went,
// and gives each job's workflow id, line, exit status and, for the
// command that held 50 MB, its peak RSS; its trace holds a complete event
// per job and a begin and an end per item; its page draws the items.
func TestReportItemsAndMemory(t *testing.T) {
	dir := t.TempDir()
	wf := `items:
  ref:
    run: head -c 100000 /dev/zero > "$POOLRUN_ITEM"
  big:
    run: head -c 300000 /dev/zero > "$POOLRUN_ITEM"
jobs:
  - id: use-ref-${i}
    foreach: {i: 1..2}
    needs: [ref]
    run: cat "$POOLRUN_ITEM_REF" > /dev/null
  - id: hungry
    after: ["use-ref-*"]
    needs: [big]
    run: head -c 50000000 /dev/zero | sort > /dev/null
  - id: broken
    run: exit 3
  - id: hungry-broken
    after: [hungry]
    run: head -c 50000000 /dev/zero | sort > /dev/null; exit 4
`
	os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(wf), 0o644)
	before := time.Now()
	if r := poolrun(t, dir, "run", "-k", "-j", "2", "--quiet", "--report", "r.json", "wf.yaml"); r.code != 1 {
		t.Fatalf("run: exit %d, want 1 (a job fails)\n%s", r.code, r.stderr)
	}
	after := time.Now()
	var rep struct {
		Version int `json:"version"`
		Workers []struct {
			Index int `json:"index"`
			Items []struct {
				Name         string     `json:"name"`
				Bytes        int64      `json:"bytes"`
				BuildStarted time.Time  `json:"build_started"`
				Built        time.Time  `json:"built"`
				Evicted      *time.Time `json:"evicted"`
				EvictedBy    string     `json:"evicted_by"`
			} `json:"items"`
		} `json:"workers"`
		Jobs []struct {
			ID         int    `json:"id"`
			JobID      string `json:"job_id"`
			Line       int    `json:"line"`
			Status     string `json:"status"`
			ExitStatus *int   `json:"exit_status"`
			PeakRSS    int64  `json:"peak_rss_bytes"`
		} `json:"jobs"`
		Totals struct {
			Floor int64 `json:"command_rss_floor_bytes"`
		} `json:"totals"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "r.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Version != 2 || len(rep.Workers) != 2 || len(rep.Jobs) != 5 {
		t.Fatalf("report: version %d, %d workers, %d jobs; want 2, 2, 5", rep.Version, len(rep.Workers), len(rep.Jobs))
	}

	// Items: ref on the workers that ran use-ref-*, big on hungry's; each
	// named, sized, built and evicted in order, within the run.
	sizes := map[string]int64{"ref": 100000, "big": 300000}
	seen := map[string]int{}
	for _, w := range rep.Workers {
		for _, it := range w.Items {
			name := strings.TrimPrefix(it.Name, "poolrun.item:")
			name, _, _ = strings.Cut(name, "@")
			seen[name]++
			if it.Bytes != sizes[name] {
				t.Errorf("worker %d item %s: %d bytes, want %d", w.Index, it.Name, it.Bytes, sizes[name])
			}
			if it.BuildStarted.Before(before) || it.Built.Before(it.BuildStarted) || it.Evicted == nil || it.Evicted.Before(it.Built) || it.Evicted.After(after) {
				t.Errorf("worker %d item %s: build %v to %v, evicted %v; run from %v to %v", w.Index, name, it.BuildStarted, it.Built, it.Evicted, before, after)
			}
			// ref goes as soon as no job needs it: by the policy; big
			// when hungry is done, by the policy too, or with the clear at
			// the end if the pool ended first.
			if want := "policy"; name == "ref" && it.EvictedBy != want || name == "big" && it.EvictedBy != "policy" && it.EvictedBy != "end" {
				t.Errorf("worker %d item %s: evicted by %q", w.Index, name, it.EvictedBy)
			}
		}
	}
	if seen["ref"] < 1 || seen["big"] != 1 || len(seen) != 2 {
		t.Errorf("items built: %v; want ref at least once, big once", seen)
	}

	// Jobs: their ids, lines, exit statuses; the peak memory of hungry,
	// and of hungry-broken, which failed (its message gives it), not of
	// broken, which used no more than poolrun.
	lines := map[string]int{"use-ref-1": 7, "use-ref-2": 7, "hungry": 11, "broken": 15, "hungry-broken": 17}
	for _, j := range rep.Jobs {
		if j.Line != lines[j.JobID] {
			t.Errorf("job %q: line %d, want %d", j.JobID, j.Line, lines[j.JobID])
		}
		want := map[string]int{"broken": 3, "hungry-broken": 4}[j.JobID]
		if j.ExitStatus == nil || *j.ExitStatus != want {
			t.Errorf("job %q: exit status %v, want %d", j.JobID, j.ExitStatus, want)
		}
		// A failed command's figure is there only where it passed
		// poolrun's own (about 16 MB; more under -race, when this check
		// cannot tell).
		if (j.JobID == "hungry" || j.JobID == "hungry-broken" && rep.Totals.Floor < 40_000_000) && (j.PeakRSS < 45_000_000 || j.PeakRSS > 4<<30) {
			t.Errorf("%s held 50 MB in sort; its peak RSS is %d bytes (poolrun's own %d)", j.JobID, j.PeakRSS, rep.Totals.Floor)
		}
		if j.JobID == "broken" && j.PeakRSS != 0 {
			t.Errorf("broken used no more than poolrun; its peak RSS is %d bytes, want none", j.PeakRSS)
		}
	}
	if rep.Totals.Floor <= 0 {
		t.Errorf("no command_rss_floor_bytes in the totals")
	}

	// The trace: JSON, a complete event per job, a begin and an end per
	// item.
	if r := poolrun(t, dir, "report", "--format", "trace", "-o", "t.json", "r.json"); r.code != 0 || strings.TrimSpace(r.stdout) != "t.json" {
		t.Fatalf("report --format trace: exit %d, printed %q\n%s", r.code, r.stdout, r.stderr)
	}
	var trace struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Ts   float64        `json:"ts"`
			Dur  *float64       `json:"dur"`
			Pid  int            `json:"pid"`
			ID   string         `json:"id"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	data, err = os.ReadFile(filepath.Join(dir, "t.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &trace); err != nil {
		t.Fatalf("the trace is not JSON: %v", err)
	}
	complete := map[float64]int{}
	spans := map[string]int{}
	begins := 0
	for _, e := range trace.TraceEvents {
		switch e.Ph {
		case "X":
			if e.Dur == nil || e.Pid < 1 {
				t.Errorf("complete event %+v: no duration, or not on a worker", e)
			}
			complete[e.Args["job"].(float64)]++
		case "b":
			spans[e.ID+"/"+e.Name]++
			if e.Name != "build" {
				begins++
			}
		case "e":
			spans[e.ID+"/"+e.Name]--
		}
	}
	for _, j := range rep.Jobs {
		if complete[float64(j.ID)] != 1 {
			t.Errorf("job %q: %d complete events, want 1", j.JobID, complete[float64(j.ID)])
		}
	}
	if begins != seen["ref"]+seen["big"] {
		t.Errorf("%d item spans, want %d", begins, seen["ref"]+seen["big"])
	}
	for k, n := range spans {
		if n != 0 {
			t.Errorf("span %s: %d more begins than ends", k, n)
		}
	}

	// The page: a bar per item, by its name.
	if r := poolrun(t, dir, "report", "-o", "p.html", "r.json"); r.code != 0 {
		t.Fatalf("report: exit %d\n%s", r.code, r.stderr)
	}
	page, err := os.ReadFile(filepath.Join(dir, "p.html"))
	if err != nil {
		t.Fatal(err)
	}
	for name, n := range seen {
		if got := strings.Count(string(page), `data-item="`+name+`"`); got != n {
			t.Errorf("the page draws %d bars of item %s, want %d", got, name, n)
		}
	}
}

// TestReportVersion1 reads a report that poolrun wrote at version 1: its
// page and its trace are made.
func TestReportVersion1(t *testing.T) {
	dir := t.TempDir()
	fixture, err := filepath.Abs(filepath.Join("..", "..", "internal", "report", "testdata", "report-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r := poolrun(t, dir, "report", "-o", "v1.html", fixture); r.code != 0 {
		t.Fatalf("report of version 1: exit %d\n%s", r.code, r.stderr)
	}
	page := readPage(t, filepath.Join(dir, "v1.html"))
	if len(page.jobs) != 6 {
		t.Errorf("the page of the version 1 report draws %d jobs, want 6", len(page.jobs))
	}
	if r := poolrun(t, dir, "report", "--format", "trace", "-o", "v1.trace.json", fixture); r.code != 0 {
		t.Fatalf("trace of version 1: exit %d\n%s", r.code, r.stderr)
	}
	data, err := os.ReadFile(filepath.Join(dir, "v1.trace.json"))
	if err != nil || !json.Valid(data) {
		t.Errorf("the trace of the version 1 report: %v, valid JSON %v", err, json.Valid(data))
	}
}
