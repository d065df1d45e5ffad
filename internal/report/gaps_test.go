package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Markup in a job's id, function, error, stderr, labels, an item's name
// or a host comes out as text: the page holds no element it names, and
// the text, escaped.
func TestPageEscapes(t *testing.T) {
	const script, img = "<script>alert(1)</script>", "<img src=x onerror=alert(1)>"
	r := testReportV2()
	j := r.Jobs[0]
	j.Labels = map[string]string{"id": script + img}
	j.JobID, j.Func = script, img
	j.Error = "exit status 1: " + script + "\n" + img
	j.Attempts = []Attempt{{Worker: 1, Sent: *j.Sent, Ended: *j.Ended, Status: "failed", Error: img, StderrTail: script},
		{Worker: 1, Sent: *j.Sent, Ended: *j.Ended, Status: j.Status}}
	r.Workers[0].Host = img
	r.Workers[0].Items[0].Name = script
	r.Command = "run " + img
	var buf bytes.Buffer
	if err := renderPool(&buf, r, img+".json"); err != nil {
		t.Fatal(err)
	}
	html := parsePage(t, buf.Bytes())
	for _, name := range []string{"script", "img"} {
		if n := len(html.named(name)); n > 0 {
			t.Errorf("the page has %d %s elements", n, name)
		}
	}
	if text := html.allText(); !strings.Contains(text, script) || !strings.Contains(text, img) {
		t.Error("the page does not show the markup as text")
	}
	if bytes.Contains(buf.Bytes(), []byte("<script")) || bytes.Contains(buf.Bytes(), []byte("<img")) {
		t.Error("the page's source holds the markup unescaped")
	}
}

// A worker's cache chart steps where its items' bars begin and end (at
// the end of a build, at an eviction), not at the samples after them.
func TestCacheChartInStepWithItems(t *testing.T) {
	r := testReportV2()
	t0 := r.Started
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	ev := at(0.6)
	w := &r.Workers[0]
	w.Items = []*Item{{Name: "a", Bytes: 1 << 20, BuildStarted: at(0.1), Built: at(0.2), Evicted: &ev, EvictedBy: "policy"}}
	w.Samples = []Sample{{T: 0.5, CacheBytes: 1 << 20}, {T: 0.9}} // a late sampler
	var buf bytes.Buffer
	if err := renderPool(&buf, r, "r.json"); err != nil {
		t.Fatal(err)
	}
	tl := newTimeline(r)
	blocks := parsePage(t, buf.Bytes()).named("g", "worker-block")
	cache := blocks[0].named("path", "cache")
	if len(cache) != 1 {
		t.Fatalf("%d cache areas", len(cache))
	}
	d := cache[0].attrs["d"]
	for _, s := range []float64{0.2, 0.6} {
		if !strings.Contains(d, "H"+f1(tl.x(s))+"V") {
			t.Errorf("the cache area %q does not step at %v s (x %s), where the item's bar does", d, s, f1(tl.x(s)))
		}
	}
	if strings.Contains(d, "H"+f1(tl.x(0.5))+"V") {
		t.Errorf("the cache area %q steps at the sample of 0.5 s", d)
	}
}

// In the trace, each run of a retried job has its own exit status and
// its own times: the failed first run its status 3, not the job's 0.
func TestTraceAttempts(t *testing.T) {
	r := testReportV2()
	t0 := r.Started
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	three, zero := 3, 0
	s1, s2 := at(0.12), at(0.52)
	j := &Job{ID: 9, Func: "poolrun.exec", Labels: map[string]string{"id": "flaky"}, Status: "succeeded", Worker: 1, Added: t0,
		Sent: &s2, Started: &s2, Ended: ptr(at(0.7)), Command: Command{JobID: "flaky", Line: 9, ExitStatus: &zero, PeakRSS: 5 << 20},
		Attempts: []Attempt{
			{Worker: 1, Sent: at(0.1), Started: &s1, Ended: at(0.5), Status: "failed", Error: "exit status 3", ExitCode: &three},
			{Worker: 1, Sent: at(0.5), Started: &s2, Ended: at(0.7), Status: "succeeded"},
		}}
	r.Jobs = append(r.Jobs, j)
	var buf bytes.Buffer
	if err := WriteTrace(&buf, r, "r.json"); err != nil {
		t.Fatal(err)
	}
	var tf struct {
		TraceEvents []struct {
			Ph   string
			Ts   float64
			Dur  float64
			Args map[string]any
		}
	}
	if err := json.Unmarshal(buf.Bytes(), &tf); err != nil {
		t.Fatal(err)
	}
	want := map[float64][3]float64{1: {3, 120e3, 380e3}, 2: {0, 520e3, 180e3}} // attempt: exit status, ts, dur
	found := 0
	for _, e := range tf.TraceEvents {
		if e.Ph != "X" || e.Args["job"] != 9.0 {
			continue
		}
		found++
		w, ok := want[e.Args["attempt"].(float64)]
		if !ok {
			t.Errorf("attempt %v", e.Args["attempt"])
			continue
		}
		if e.Args["exit_status"] != w[0] || e.Ts != w[1] || e.Dur != w[2] {
			t.Errorf("attempt %v: exit status %v, ts %v, dur %v; want %v", e.Args["attempt"], e.Args["exit_status"], e.Ts, e.Dur, w)
		}
		if _, has := e.Args["peak_rss_bytes"]; has != (e.Args["attempt"] == 2.0) {
			t.Errorf("attempt %v: peak RSS %v, want only on the last run", e.Args["attempt"], e.Args["peak_rss_bytes"])
		}
	}
	if found != 2 {
		t.Errorf("%d runs of the retried job in the trace, want 2", found)
	}
}

func ptr[T any](v T) *T { return &v }

// The page has a table of all jobs in four orders (the first shown, the
// others by CSS alone) and a row per entry with its counts and times.
func TestJobsTableAndEntries(t *testing.T) {
	r := testReport()
	var buf bytes.Buffer
	if err := renderPool(&buf, r, "r.json"); err != nil {
		t.Fatal(err)
	}
	html := parsePage(t, buf.Bytes())
	checkSelfContained(t, html, buf.Bytes())
	tables := html.named("table", "jobs")
	if len(tables) != 4 {
		t.Fatalf("%d tables of jobs, want 4 orders", len(tables))
	}
	for _, tb := range tables {
		if rows := tb.named("tr"); len(rows) != 1+len(r.Jobs) {
			t.Errorf("table %q: %d rows, want a heading and %d", tb.attrs["class"], len(rows), len(r.Jobs))
		}
	}
	var order []string
	for _, row := range html.named("table", "by-seconds")[0].named("tr")[1:] {
		order = append(order, row.attrs["data-job"])
	}
	if order[0] != "2" { // job 2 ran longest: 300 ms
		t.Errorf("the longest first: jobs %v", order)
	}
	if n := len(html.named("input")); n != 4 {
		t.Errorf("%d radio buttons, want 4", n)
	}
	entries := html.named("table", "entries")
	if len(entries) != 1 {
		t.Fatalf("%d tables of entries", len(entries))
	}
	rows := entries[0].named("tr")
	if len(rows) != 2 || !strings.Contains(rows[1].allText(), "test.work") {
		t.Fatalf("the entries: %d rows; want a heading and test.work's", len(rows))
	}
	// 8 jobs: 2 succeeded, 1 failed, 1 skipped, 4 other; 6 runs (job 3
	// ran twice, 4, 5 and 8 never).
	cells := rows[1].named("td")
	var got []string
	for _, c := range cells[1:7] {
		got = append(got, strings.TrimSpace(c.allText()))
	}
	if strings.Join(got, " ") != "8 2 1 1 4 6" {
		t.Errorf("the entry's counts: %v, want 8 2 1 1 4 6", got)
	}
}
