package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// node is an element of a page parsed with encoding/xml: the page is
// written as well-formed XML, so a strict parse checks its structure.
type node struct {
	name     string
	attrs    map[string]string
	children []*node
	text     strings.Builder // the text directly inside it
}

// parsePage parses a page whole, strictly, and returns its root element.
func parsePage(t *testing.T, page []byte) *node {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(page))
	d.Strict = true
	root := &node{name: "#document"}
	stack := []*node{root}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the page is not well-formed: %v", err)
		}
		top := stack[len(stack)-1]
		switch tok := tok.(type) {
		case xml.StartElement:
			n := &node{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				n.attrs[a.Name.Local] = a.Value
			}
			top.children = append(top.children, n)
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			top.text.Write(tok)
		}
	}
	if len(root.children) != 1 || root.children[0].name != "html" {
		t.Fatalf("the page's root elements: want one html")
	}
	return root.children[0]
}

// all returns n's descendants (n included) for which keep is true, in
// document order.
func (n *node) all(keep func(*node) bool) []*node {
	var out []*node
	if keep(n) {
		out = append(out, n)
	}
	for _, c := range n.children {
		out = append(out, c.all(keep)...)
	}
	return out
}

// named returns n's descendants of element name with every class of
// classes.
func (n *node) named(name string, classes ...string) []*node {
	return n.all(func(m *node) bool {
		if m.name != name {
			return false
		}
		have := strings.Fields(m.attrs["class"])
		for _, c := range classes {
			if !slices.Contains(have, c) {
				return false
			}
		}
		return true
	})
}

// allText is the text of n and its descendants.
func (n *node) allText() string {
	var b strings.Builder
	for _, m := range n.all(func(*node) bool { return true }) {
		b.WriteString(m.text.String())
		b.WriteByte(' ')
	}
	return b.String()
}

// title is the text of n's title child.
func (n *node) title() string {
	for _, c := range n.children {
		if c.name == "title" {
			return c.text.String()
		}
	}
	return ""
}

// testReport is a report of two workers with a job of every kind: run
// once, run twice (aborted, then succeeded), never run, sent ahead and
// cancelled before it began, still running when the pool stopped, and an
// error with markup and a control character in it. Most runs began a
// little after they were sent.
func testReport() *Pool {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(s float64) *time.Time {
		if s < 0 {
			return nil
		}
		t := t0.Add(time.Duration(s * float64(time.Second)))
		return &t
	}
	job := func(id int, status string, worker int, sent, started, end float64, labels map[string]string) *Job {
		return &Job{ID: id, Func: "test.work", Labels: labels, Status: status, Worker: worker, Added: t0,
			Sent: at(sent), Started: at(started), Ended: at(end)}
	}
	r := &Pool{Version: Version, Command: "run wf.yaml", Started: t0, SampleSeconds: 0.1,
		Options: Options{Workers: 2, CacheSettings: CacheSettings{Evict: "stale", Affinity: true, IdleEviction: true}}}
	r.Jobs = []*Job{
		job(1, "succeeded", 1, 0.1, 0.12, 0.3, map[string]string{"id": "prepare"}),
		job(2, "failed", 2, 0.2, 0.2, 0.5, map[string]string{"id": "broken"}),
		job(3, "succeeded", 2, 0.55, 0.6, 0.8, map[string]string{"id": "retried"}),
		job(4, "cancelled", 0, -1, -1, 0.5, map[string]string{"id": "after-broken"}),
		job(5, "skipped", 0, -1, -1, 0.1, map[string]string{"id": "done-before"}),
		job(6, "cancelled", 1, 0.25, -1, 0.45, map[string]string{"chunk": "0-0-0", "type": "granule"}),
		job(7, "running", 2, 0.82, 0.85, -1, nil),
		job(8, "pending", 0, -1, -1, -1, nil),
	}
	r.Jobs[1].Error = "exit status 3: <script>alert('x')</script> & \x1b[31mred\x1b[0m"
	r.Jobs[2].Attempts = []Attempt{
		{Worker: 1, Sent: *at(0.3), Started: at(0.32), Ended: *at(0.4), Status: "aborted", Error: "worker 1 (pid 12) died: signal: killed"},
		{Worker: 2, Sent: *at(0.55), Started: at(0.6), Ended: *at(0.8), Status: "succeeded"},
	}
	r.Workers = []Worker{
		{Index: 1, PID: 11, Jobs: 3, Restarts: 1, Cache: Cache{Builds: 2, Evictions: 2, PeakBytes: 3 << 20}, PeakRSS: 40 << 20,
			Samples: []Sample{{T: 0.1, RSS: 20 << 20}, {T: 0.2, CacheBytes: 3 << 20, RSS: 30 << 20, Builds: 1}, {T: 0.3, CacheBytes: 1 << 20, RSS: 35 << 20, Evictions: 1},
				{T: 0.4, RSS: 0}, {T: 0.5, CacheBytes: 2 << 20, RSS: 25 << 20, Builds: 1}, {T: 0.9, Evictions: 1}}},
		{Index: 2, PID: 21, Jobs: 3, Cache: Cache{Builds: 1, Evictions: 1, PeakBytes: 1 << 20}, PeakRSS: 30 << 20,
			Samples: []Sample{{T: 0.1, RSS: 10 << 20}, {T: 0.6, CacheBytes: 1 << 20, RSS: 12 << 20, Builds: 1}, {T: 0.9, Evictions: 1}}},
	}
	r.Totals = Totals{Jobs: 8, ByStatus: map[string]int{"succeeded": 2, "failed": 1, "cancelled": 2, "skipped": 1, "running": 1, "pending": 1},
		WallSeconds: 0.9, Builds: 3, Evictions: 3, StaleEvictions: 1, PeakBytes: 4 << 20, SummedPeakBytes: 3 << 20, PeakRSS: 70 << 20}
	r.Result = map[string]any{"checksum": "0123"}
	return r
}

// checkSelfContained fails if the page refers to anything outside itself
// or runs a script.
func checkSelfContained(t *testing.T, html *node, page []byte) {
	t.Helper()
	if s := html.named("script"); len(s) > 0 {
		t.Errorf("the page has %d script elements", len(s))
	}
	for _, n := range html.all(func(*node) bool { return true }) {
		for _, a := range []string{"src", "href"} {
			if v, ok := n.attrs[a]; ok {
				t.Errorf("<%s %s=%q>: the page refers to another file", n.name, a, v)
			}
		}
	}
	rest := strings.ReplaceAll(string(page), `xmlns="http://www.w3.org/2000/svg"`, "")
	for _, s := range []string{"http:", "https:", "url(", "@import"} {
		if strings.Contains(rest, s) {
			t.Errorf("the page contains %q", s)
		}
	}
}

// TestPoolPage renders a report with a job of every kind, parses the page
// and checks its parts: a bar per run on its worker with the job in its
// hover text, a mark per job that never ran, each worker's chart with a
// mark per sample with builds or evictions, the tables, nothing external.
func TestPoolPage(t *testing.T) {
	r := testReport()
	r.Version = 1 // marks of builds and evictions, the workers' RSS
	var buf bytes.Buffer
	if err := renderPool(&buf, r, "r.json"); err != nil {
		t.Fatal(err)
	}
	html := parsePage(t, buf.Bytes())
	checkSelfContained(t, html, buf.Bytes())
	if got := html.named("title"); len(got) == 0 || !strings.Contains(got[0].text.String(), "run wf.yaml") {
		t.Errorf("the page's title does not name the command")
	}
	svgs := html.named("svg", "timeline")
	if len(svgs) != 1 {
		t.Fatalf("%d timelines, want 1", len(svgs))
	}
	svg := svgs[0]

	// Every job is drawn: a bar per run, or a mark if it never ran.
	byJob := map[int][]*node{}
	for _, n := range svg.all(func(n *node) bool { return n.attrs["data-job"] != "" }) {
		id, err := strconv.Atoi(n.attrs["data-job"])
		if err != nil {
			t.Fatalf("data-job %q", n.attrs["data-job"])
		}
		byJob[id] = append(byJob[id], n)
	}
	for _, j := range r.Jobs {
		if len(byJob[j.ID]) == 0 {
			t.Errorf("job %d is not on the page", j.ID)
		}
		for _, n := range byJob[j.ID] {
			if !strings.Contains(n.title(), "job "+strconv.Itoa(j.ID)) {
				t.Errorf("job %d: hover text %q does not name it", j.ID, n.title())
			}
		}
	}
	if len(byJob) != len(r.Jobs) {
		t.Errorf("%d jobs on the page, want %d", len(byJob), len(r.Jobs))
	}
	// Each run on its worker's lane, coloured by how it ended.
	for _, tt := range []struct {
		job     int
		worker  string
		classes []string // of the job's bars, in order of start
	}{
		{1, "1", []string{"job succeeded g0"}},
		{2, "2", []string{"job failed g0"}},
		{3, "", []string{"job aborted g0", "job succeeded g0"}}, // on worker 1, then 2
		{4, "", []string{"notrun cancelled"}},
		{5, "", []string{"notrun skipped"}},
		{6, "1", []string{"job cancelled g0"}},
		{7, "2", []string{"job other g0"}},
		{8, "", []string{"notrun other"}},
	} {
		var got []string
		for _, n := range byJob[tt.job] {
			got = append(got, strings.TrimSuffix(n.attrs["class"], " alt"))
		}
		if !slices.Equal(got, tt.classes) {
			t.Errorf("job %d: bars of classes %q, want %q", tt.job, got, tt.classes)
		}
	}
	blocks := svg.named("g", "worker-block")
	if len(blocks) != 2 {
		t.Fatalf("%d worker blocks, want 2", len(blocks))
	}
	for i, b := range blocks {
		w := r.Workers[i]
		if b.attrs["data-worker"] != strconv.Itoa(w.Index) {
			t.Errorf("block %d is of worker %q", i, b.attrs["data-worker"])
		}
		for _, bar := range b.named("rect", "job") {
			id, _ := strconv.Atoi(bar.attrs["data-job"])
			onWorker := slices.ContainsFunc(r.Jobs, func(j *Job) bool {
				if j.ID != id {
					return false
				}
				if len(j.Attempts) > 0 {
					return slices.ContainsFunc(j.Attempts, func(a Attempt) bool { return a.Worker == w.Index })
				}
				return j.Worker == w.Index
			})
			if !onWorker {
				t.Errorf("job %d drawn on worker %d, where it did not run", id, w.Index)
			}
		}
		var builds, evictions int
		for _, s := range w.Samples {
			if s.Builds > 0 {
				builds++
			}
			if s.Evictions > 0 {
				evictions++
			}
		}
		if n := len(b.named("path", "cache")); n != 1 {
			t.Errorf("worker %d: %d cache areas, want 1", w.Index, n)
		}
		if n := len(b.named("path", "rss")); n != 1 {
			t.Errorf("worker %d: %d RSS lines, want 1", w.Index, n)
		}
		if n := len(b.named("path", "build")); n != builds {
			t.Errorf("worker %d: %d build marks, want %d", w.Index, n, builds)
		}
		if n := len(b.named("path", "evict")); n != evictions {
			t.Errorf("worker %d: %d eviction marks, want %d", w.Index, n, evictions)
		}
	}
	// Worker 1's RSS is unknown at 0.4 s: its line is broken there.
	if d := blocks[0].named("path", "rss")[0].attrs["d"]; strings.Count(d, "M") != 2 {
		t.Errorf("worker 1's RSS line %q: want two pieces", d)
	}
	// The error is text, escaped, not markup; the control character is gone.
	failed := byJob[2][0].title()
	if !strings.Contains(failed, "<script>alert('x')</script> & ") || strings.Contains(failed, "\x1b") {
		t.Errorf("the failed job's hover text: %q", failed)
	}

	tables := map[string]*node{}
	for _, tb := range html.named("table") {
		tables[tb.attrs["class"]] = tb
	}
	for _, tt := range []struct{ class, want string }{
		{"totals", "wall time"},
		{"totals", "900ms"},
		{"totals", "2 succeeded, 1 failed, 2 cancelled, 1 skipped, 1 pending, 1 running"},
		{"workers", "40.0 MiB"},
		{"unsuccessful", `job 2 "broken"`},
		{"unsuccessful", "<script>"},
	} {
		tb := tables[tt.class]
		if tb == nil {
			t.Errorf("no table %q", tt.class)
			continue
		}
		if !strings.Contains(tb.allText(), tt.want) {
			t.Errorf("table %q does not say %q", tt.class, tt.want)
		}
	}
	if rows := tables["workers"].named("tr"); len(rows) != 1+len(r.Workers) {
		t.Errorf("the workers table has %d rows, want a heading and %d", len(rows), len(r.Workers))
	}
	// Succeeded and skipped jobs are not among those that did not succeed.
	if rows := tables["unsuccessful"].named("tr"); len(rows) != 1+5 {
		t.Errorf("the table of jobs that did not succeed has %d rows, want a heading and 5", len(rows))
	}
	if !strings.Contains(html.allText(), `"checksum": "0123"`) {
		t.Error("the command's result is not on the page")
	}
}

// A report written before samples (version 0) is drawn with every job,
// and its charts say why they are empty.
func TestPoolPageVersion0(t *testing.T) {
	r := testReport()
	r.Version, r.Started, r.SampleSeconds = 0, time.Time{}, 0
	for i := range r.Workers {
		r.Workers[i].Samples = nil
	}
	var buf bytes.Buffer
	if err := renderPool(&buf, r, "old.json"); err != nil {
		t.Fatal(err)
	}
	html := parsePage(t, buf.Bytes())
	ids := map[string]bool{}
	for _, n := range html.all(func(n *node) bool { return n.attrs["data-job"] != "" }) {
		ids[n.attrs["data-job"]] = true
	}
	if len(ids) != len(r.Jobs) {
		t.Errorf("%d jobs on the page, want %d", len(ids), len(r.Jobs))
	}
	if n := len(html.named("path", "cache")); n != 0 {
		t.Errorf("%d cache areas without samples", n)
	}
	if !strings.Contains(html.allText(), "version 0") {
		t.Error("the page does not say the report has no samples for being of version 0")
	}
}

// jobBars returns the page's job bars by job, in document order.
func jobBars(html *node) map[int][]*node {
	bars := map[int][]*node{}
	for _, n := range html.named("rect", "job") {
		id, _ := strconv.Atoi(n.attrs["data-job"])
		bars[id] = append(bars[id], n)
	}
	return bars
}

// checkBar fails unless exactly one of the job's bars has hover text that
// says says, and that bar runs from from to to seconds of tl (to < 0: to
// the end of the picture).
func checkBar(t *testing.T, tl *timeline, bars map[int][]*node, job int, says string, from, to float64) {
	t.Helper()
	var found []*node
	for _, b := range bars[job] {
		if strings.Contains(b.title(), says) {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		var titles []string
		for _, b := range bars[job] {
			titles = append(titles, b.title())
		}
		t.Errorf("job %d: %d bars say %q, want 1; they say %q", job, len(found), says, titles)
		return
	}
	if to < 0 {
		to = tl.span
	}
	b := found[0]
	if x, w := f1(tl.x(from)), f1(tl.x(to)-tl.x(from)); b.attrs["x"] != x || b.attrs["width"] != w {
		t.Errorf("job %d, the bar that says %q: x %s, width %s; want %s, %s (from %v s to %v s)", job, says, b.attrs["x"], b.attrs["width"], x, w, from, to)
	}
}

// Each bar runs from when its run began (started), not from when it was
// sent, and its hover text gives both; a run sent ahead and cancelled
// before it began runs from when it was sent, and says that it did not
// start.
func TestPoolPageBarsFromStarted(t *testing.T) {
	r := testReport()
	var buf bytes.Buffer
	if err := renderPool(&buf, r, "r.json"); err != nil {
		t.Fatal(err)
	}
	bars := jobBars(parsePage(t, buf.Bytes()))
	tl := newTimeline(r)
	for _, tt := range []struct {
		job      int
		says     string
		from, to float64
	}{
		{1, "sent 0.100 s, started 0.120 s, ended 0.300 s: 180ms", 0.12, 0.3},
		{2, "sent 0.200 s, started 0.200 s, ended 0.500 s: 300ms", 0.2, 0.5},
		{3, "attempt 1 of 2: aborted\nsent 0.300 s, started 0.320 s, ended 0.400 s: 80ms", 0.32, 0.4},
		{3, "attempt 2 of 2: succeeded\nsent 0.550 s, started 0.600 s, ended 0.800 s: 200ms", 0.6, 0.8},
		{6, "sent 0.250 s, not started, ended 0.450 s: 200ms", 0.25, 0.45},
		{7, "sent 0.820 s, started 0.850 s, no end recorded", 0.85, -1},
	} {
		checkBar(t, tl, bars, tt.job, tt.says, tt.from, tt.to)
	}
}

// A report of a poolrun from before sent, whose started is when a run was
// sent to its worker, is drawn as that poolrun drew it: the bars from
// started, a job sent while another ran beside it, and the hover text
// says started, not sent.
func TestPoolPageBeforeSent(t *testing.T) {
	l, err := Load(filepath.Join("testdata", "report-before-sent.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := l.Pool
	for _, j := range r.Jobs {
		if j.Sent != nil || j.Started == nil {
			t.Errorf("job %d: sent %v, started %v; want none and the send time", j.ID, j.Sent, j.Started)
		}
		for i, a := range j.Attempts {
			if !a.Sent.IsZero() || a.Started == nil {
				t.Errorf("job %d, attempt %d: sent %v, started %v; want none and the send time", j.ID, i+1, a.Sent, a.Started)
			}
		}
	}
	var buf bytes.Buffer
	if err := Render(&buf, l, "old.json"); err != nil {
		t.Fatal(err)
	}
	html := parsePage(t, buf.Bytes())
	bars := jobBars(html)
	tl := newTimeline(r)
	for _, tt := range []struct {
		job      int
		says     string
		from, to float64
	}{
		{1, "started 0.100 s, ended 0.400 s: 300ms", 0.1, 0.4},
		{2, "started 0.200 s, ended 0.600 s: 400ms", 0.2, 0.6},
		{3, "attempt 1 of 2: aborted\nstarted 0.600 s, ended 0.650 s: 50ms", 0.6, 0.65},
		{3, "attempt 2 of 2: failed\nstarted 0.700 s, ended 0.900 s: 200ms", 0.7, 0.9},
	} {
		checkBar(t, tl, bars, tt.job, tt.says, tt.from, tt.to)
	}
	for _, b := range html.named("rect", "job") {
		if strings.Contains(b.title(), "sent") {
			t.Errorf("job %s: hover text %q speaks of a send time the report does not give", b.attrs["data-job"], b.title())
		}
	}
	// Job 2 was sent while job 1 ran: its bar is in a row of its own.
	if len(bars[1]) == 1 && len(bars[2]) == 1 && bars[1][0].attrs["y"] == bars[2][0].attrs["y"] {
		t.Errorf("jobs 1 and 2 overlap in time, but are drawn in the same row (y %s)", bars[1][0].attrs["y"])
	}
}

// testBench is a bench report of two worker counts, two modes, two runs.
func testBench() *Bench {
	run := func(wall, peak float64, sum string) BenchRun {
		return BenchRun{BenchFigures: BenchFigures{WallSeconds: wall, Builds: 6, SummedPeakBytes: peak, PeakBytes: peak,
			WorkerPeakBytes: []float64{peak / 2, peak / 2}, WorkerPeakRSS: []float64{50 << 20, 60 << 20}, MaxPeakRSS: 60 << 20}, Checksum: sum}
	}
	b := &Bench{Command: "bench", Config: "embedded", Scale: 0.1, Jobs: 216, Items: 4, Workers: []int{2, 0},
		Modes: []string{"plain", "all"}, Repeat: 2, ChecksumsAgree: true, Checksum: "abc"}
	for _, n := range []int{2, 0} {
		set := &BenchSet{Workers: n}
		for _, m := range []string{"plain", "all"} {
			mf := &BenchMode{Mode: m, Options: CacheSettings{Evict: "stale", Affinity: m == "all", IdleEviction: m == "all"},
				Runs: []BenchRun{run(1, 10<<20, "abc"), run(1.2, 12<<20, "abc")}}
			mf.Median = mf.Runs[0].BenchFigures
			set.Modes = append(set.Modes, mf)
		}
		b.Results = append(b.Results, set)
	}
	return b
}

// A bench report's page says that it has no timelines, and has a chart
// and a table of runs per worker count, with every run and the medians.
func TestBenchPage(t *testing.T) {
	b := testBench()
	var buf bytes.Buffer
	if err := renderBench(&buf, b, "b.json"); err != nil {
		t.Fatal(err)
	}
	html := parsePage(t, buf.Bytes())
	checkSelfContained(t, html, buf.Bytes())
	if !strings.Contains(html.allText(), "No timelines here") {
		t.Error("the page does not say that a bench report has no timelines")
	}
	if n := len(html.named("svg", "timeline")); n != 0 {
		t.Errorf("%d timelines on a bench page", n)
	}
	if n := len(html.named("svg", "bars")); n != len(b.Results) {
		t.Errorf("%d charts, want one per worker count (%d)", n, len(b.Results))
	}
	runs := html.named("table", "runs")
	if len(runs) != len(b.Results) {
		t.Fatalf("%d tables of runs, want %d", len(runs), len(b.Results))
	}
	for i, tb := range runs {
		rows := tb.named("tr")
		want := 1 + 2*(2+1) // a heading; per mode, 2 runs and the median
		if len(rows) != want {
			t.Errorf("table %d: %d rows, want %d", i, len(rows), want)
		}
		if n := len(tb.named("tr", "median")); n != 2 {
			t.Errorf("table %d: %d median rows, want 2", i, n)
		}
	}
	if got := html.named("table", "modes"); len(got) != 1 || !strings.Contains(got[0].allText(), "--no-affinity --no-idle-eviction") {
		t.Error("the table of modes does not give plain's flags")
	}
	if got := html.named("h2"); len(got) != 2 || !strings.Contains(got[1].text.String(), "serial") {
		t.Error("want a section per worker count, the second serial")
	}
}

// loadReport tells pool and bench reports from other files, refuses a
// version it does not know, and names the file in every error.
func TestLoadReport(t *testing.T) {
	pool, _ := json.Marshal(testReport())
	bench, _ := json.Marshal(testBench())
	v0 := bytes.Replace(pool, []byte(`"version":2,`), nil, 1)
	if bytes.Equal(v0, pool) {
		t.Fatal("no version in the test report")
	}
	for _, tt := range []struct {
		name, data string
		want       error  // nil: loads
		says       string // in the message
		isBench    bool
	}{
		{name: "pool", data: string(pool)},
		{name: "version 0", data: string(v0)},
		{name: "bench", data: string(bench), isBench: true},
		{name: "not JSON", data: "jobs:\n  - id: a\n", want: ErrNotReport, says: "line 1"},
		{name: "truncated", data: string(pool[:len(pool)/2]), want: ErrNotReport},
		{name: "an array", data: "[1, 2]", want: ErrNotReport},
		{name: "another JSON", data: `{"name": "x", "jobs": []}`, want: ErrNotReport, says: "no command"},
		{name: "newer version", data: `{"version": 99, "command": "run", "workers": [], "jobs": [], "totals": {}}`, want: ErrVersion, says: "up to 2"},
		{name: "negative version", data: `{"version": -1, "command": "run", "workers": [], "jobs": [], "totals": {}}`, want: ErrVersion},
		{name: "version not a number", data: `{"version": "1", "command": "run", "workers": [], "jobs": [], "totals": {}}`, want: ErrVersion},
		{name: "bad field", data: `{"version": 1, "command": "run", "workers": [], "jobs": [{"id": "x"}], "totals": {}}`, want: ErrNotReport, says: "line 1"},
		{name: "null job", data: `{"version": 1, "command": "run", "workers": [], "jobs": [null], "totals": {}}`, want: ErrNotReport, says: "null"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r.json")
			os.WriteFile(path, []byte(tt.data), 0o644)
			l, err := Load(path)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if (l.Bench != nil) != tt.isBench || (l.Pool != nil) == tt.isBench {
					t.Errorf("loaded as bench %v, want %v", l.Bench != nil, tt.isBench)
				}
				return
			}
			if !errors.Is(err, tt.want) || !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error %v; want %v, naming %s, saying %q", err, tt.want, path, tt.says)
			}
		})
	}
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "none.json")); err == nil || !strings.Contains(err.Error(), "none.json: no such file") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Load(dir); err == nil || err.Error() != dir+": is a directory, not a regular file" {
		t.Errorf("a folder: %v", err)
	}
	// Over the limit, refused from its size: the sparse file is not read.
	over := filepath.Join(dir, "over.json")
	if err := os.WriteFile(over, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(over, MaxSize+1); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(over); err == nil || err.Error() != over+": 1073741825 bytes, larger than 1.0 GiB: not a report of poolrun" {
		t.Errorf("a file over the limit: %v", err)
	}
}

// FuzzReport feeds poolrun report arbitrary contents of a report file:
// each is refused with an error that names the file, or makes a
// well-formed page.
//
// The fuzzer minimises every input that reaches new code before it goes
// on, by a number of executions that grows with the square of the input's
// size, for up to -fuzzminimizetime (a minute by default), and counts no
// executions meanwhile. Each execution here costs more than the target:
// the coverage counters of everything this package's test binary links
// (the NATS server of package cluster among them) are cleared and
// compared every time. With seeds of kilobytes, and each input written to
// a file and read back, every minimisation ran until its deadline, and
// fuzzing looked stalled. So the target
// decodes from memory (TestLoadReport covers the reading of the file),
// the seeds are small (and still hold every part a page draws: hosts,
// samples, retried, failed and running jobs, jobs that never ran, a
// result; a bench's modes, runs and budgets), and, unless the command
// line says otherwise, minimisation stops after fuzzMinimizeTime.
func FuzzReport(f *testing.F) {
	if fuzzing() && !flagGiven("test.fuzzminimizetime") {
		if err := flag.Set("test.fuzzminimizetime", fuzzMinimizeTime.String()); err != nil {
			f.Fatal(err)
		}
	}
	// A pool's options and totals.
	f.Add([]byte(`{"version":1,"command":"run w","started":"2026-01-02T03:04:05Z","sample_seconds":0.1,"workers":[],"jobs":[],` +
		`"options":{"workers":2,"retries":1,"timeout_seconds":9,"evict":"stale","affinity":true,"idle_eviction":true,"cache_budget_bytes":9},` +
		`"totals":{"jobs":1,"by_status":{"succeeded":1},"wall_seconds":0.9,"budget_exceeded":{"jobs":1,"max_bytes":5,"worker":1,"job":1}},"result":{"c":"0"}}`))
	// Its workers and their samples.
	f.Add([]byte(`{"version":1,"command":"run","started":"2026-01-02T03:04:05Z","sample_seconds":0.1,"totals":{},` +
		`"workers":[{"index":1,"pid":11,"host":"n<1>","jobs":1,"restarts":1,"samples":[{"t":0.1,"rss_bytes":9000},{"t":0.2,"cache_bytes":3000,"builds":1},{"t":0.4,"evictions":1}],"peak_rss_bytes":9000,"cache":{"builds":1,"peak_bytes":3000}},{"index":2,"pid":21}],` +
		`"jobs":[{"id":1,"status":"succeeded","worker":1,"started":"2026-01-02T03:04:05.1Z","ended":"2026-01-02T03:04:05.3Z"}]}`))
	// Its jobs: retried and failed; never run, running, with labels.
	f.Add([]byte(`{"command":"run","started":"2026-01-02T03:04:05Z","workers":[{"index":1},{"index":2}],"totals":{"wall_seconds":0.9},"jobs":[` +
		`{"id":1,"func":"w","labels":{"id":"a"},"status":"failed","worker":2,"started":"2026-01-02T03:04:05.2Z","ended":"2026-01-02T03:04:05.5Z","error":"<x>&","attempts":[{"worker":1,"status":"aborted","error":"d"},{"worker":2,"sent":"2026-01-02T03:04:05.1Z","started":"2026-01-02T03:04:05.2Z","status":"failed"}]}]}`))
	f.Add([]byte(`{"command":"run","started":"2026-01-02T03:04:05Z","workers":[{"index":1}],"totals":{"wall_seconds":0.9},"jobs":[{"id":2,"status":"cancelled","ended":"2026-01-02T03:04:05.5Z","error":"e"},` +
		`{"id":3,"func":"s.c","labels":{"k":"v"},"status":"pending"},{"id":4,"func":"s.c","labels":{"k":"v"},"status":"running","worker":1,"started":"2026-01-02T03:04:05.4Z"},` +
		`{"id":5,"status":"succeeded","worker":1,"sent":"2026-01-02T03:04:05Z","started":"2026-01-02T03:04:05.1Z","ended":"2026-01-02T03:04:05.5Z"},{"id":6,"status":"succeeded","worker":1,"started":"2026-01-02T03:04:05.1Z"}]}`))
	// A bench's runs, medians and modes.
	f.Add([]byte(`{"command":"bench","workers":[2],"modes":["plain"],"repeat":2,"results":[{"workers":2,"modes":[{"mode":"plain","options":{"evict":"stale"},` +
		`"runs":[{"wall_seconds":1,"builds":6,"worker_peak_cache_bytes":[5,6],"worker_peak_rss_bytes":[7],"checksum":"a"},{"wall_seconds":1.2}],"median":{"wall_seconds":1.1}}]}],"checksums_agree":false}`))
	f.Add([]byte(`{"command":"bench","results":[{"workers":2,"modes":[{"mode":"p","runs":[{}]}]},{"workers":0,"modes":[{"mode":"p"},` +
		`{"mode":"<b>","options":{"evict":"never","affinity":true,"idle_eviction":true},"budget_half_of_never":true,"runs":[{"cache_budget_bytes":9,"budget_exceeded_jobs":1}]},{"mode":"d","options":{"affinity":true,"idle_eviction":true}}]}],"checksums_agree":true}`))
	// Odd values.
	f.Add([]byte(`{"command": "run", "workers": [{"index": 3, "samples": [{"t": -1, "cache_bytes": -5, "rss_bytes": 9e18}]}], "jobs": [{"id": 1, "status": "\u0000", "worker": 9, "started": "2026-01-01T00:00:00Z"}], "totals": {"wall_seconds": 1e-300}}`))
	f.Add([]byte(`{"version": 1, "command": "run", "workers": [], "jobs": [{"id": 1, "labels": {"id": "]]>&<"}, "attempts": [{"worker": 2, "status": "aborted"}]}], "totals": {"wall_seconds": 1e300}}`))
	f.Add([]byte(`{"command": "bench", "results": [{"workers": 2, "modes": [{"mode": "<m>", "runs": [{"worker_peak_cache_bytes": [1, 2]}]}]}]}`))
	// Version 2: items, and a run's commands.
	f.Add([]byte(`{"version":2,"command":"run w","started":"2026-01-02T03:04:05Z","totals":{"wall_seconds":1,"command_rss_floor_bytes":5},"workers":[{"index":1,"samples":[{"t":0.5}],"items":[` +
		`{"name":"poolrun.item:a@0123456789abcdef","bytes":9,"build_started":"2026-01-02T03:04:05.1Z","built":"2026-01-02T03:04:05.2Z","evicted":"2026-01-02T03:04:05.5Z","evicted_by":"policy"},` +
		`{"name":"<b>","build_started":"2026-01-02T03:04:05.6Z","built":"2026-01-02T03:04:05.4Z","evicted_by":"x"}]}],` +
		`"jobs":[{"id":1,"status":"failed","worker":1,"started":"2026-01-02T03:04:05.1Z","ended":"2026-01-02T03:04:05.1Z","job_id":"a","line":3,"exit_status":-1,"signal":"SIGKILL","peak_rss_bytes":7},` +
		`{"id":2,"status":"succeeded","worker":1,"started":"2026-01-02T03:04:05.1Z","ended":"2026-01-02T03:04:05.9Z","job_id":"b","line":3,"exit_status":0,"peak_rss_bytes":70}]}`))
	const path = "r.json"
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := Decode(path, data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), path+": ") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		var page bytes.Buffer
		if err := Render(&page, l, path); err != nil {
			t.Fatal(err)
		}
		parsePage(t, page.Bytes())
		if l.Pool != nil {
			var trace bytes.Buffer
			if err := WriteTrace(&trace, l.Pool, path); err != nil || !json.Valid(trace.Bytes()) {
				t.Fatalf("the trace: %v, valid JSON %v", err, json.Valid(trace.Bytes()))
			}
		}
	})
}

// fuzzMinimizeTime bounds FuzzReport's minimisation of each input,
// unless -fuzzminimizetime is given.
const fuzzMinimizeTime = time.Second

// fuzzing reports whether this test binary fuzzes (-fuzz), rather than
// runs its fuzz targets' seeds as tests.
func fuzzing() bool {
	fl := flag.Lookup("test.fuzz")
	return fl != nil && fl.Value.String() != ""
}

// flagGiven reports whether the flag name was given on the command line.
func flagGiven(name string) bool {
	given := false
	flag.Visit(func(fl *flag.Flag) { given = given || fl.Name == name })
	return given
}

// TestPoolPageHosts: the page names each worker's host, in the workers'
// table and beside its pid on the timeline, escaped.
func TestPoolPageHosts(t *testing.T) {
	r := testReport()
	r.Workers[0].Host = "node-a"
	r.Workers[1].Host = "node<b>"
	var buf bytes.Buffer
	if err := renderPool(&buf, r, "r.json"); err != nil {
		t.Fatal(err)
	}
	page := buf.Bytes()
	parsePage(t, page)
	for _, want := range []string{"<th>host</th>", "<td>node-a</td>", "<td>node&lt;b&gt;</td>", "pid 11 on node-a", "pid 21 on node&lt;b&gt;"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("the page does not contain %q", want)
		}
	}
}
