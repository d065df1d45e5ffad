package report

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/human"
)

// testReportV2 is testReport with what version 2 adds: items on both
// workers (one evicted by the policy, one for the budget, one at the end,
// one whose worker died, one never evicted), workflow lines that group the
// jobs, the commands' peak RSS and exit statuses, and a failed job of a
// millisecond.
func testReportV2() *Pool {
	r := testReport()
	t0 := r.Started
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	ptr := func(s float64) *time.Time { t := at(s); return &t }
	item := func(name string, bytes int64, start, built, evicted float64, by string) *Item {
		it := &Item{Name: name, Bytes: bytes, BuildStarted: at(start), Built: at(built), EvictedBy: by}
		if evicted >= 0 {
			it.Evicted = ptr(evicted)
		}
		return it
	}
	r.Workers[0].Items = []*Item{
		item("poolrun.item:ref@0123456789abcdef", 3<<20, 0.1, 0.15, 0.3, "policy"),
		item("poolrun.item:big@0123456789abcdef", 2<<20, 0.45, 0.5, 0.9, "end"),
		item("scaffold.index:granule", 1<<20, 0.32, 0.35, 0.4, "died"),
	}
	r.Workers[1].Items = []*Item{
		item("poolrun.item:ref@0123456789abcdef", 1<<20, 0.55, 0.58, 0.7, "budget"),
		item("poolrun.item:late@0123456789abcdef", 1<<10, 0.82, 0.84, -1, ""),
	}
	lines := map[int]int{1: 5, 2: 9, 3: 12, 4: 12, 5: 12, 7: 20}
	for _, j := range r.Jobs {
		j.Line = lines[j.ID]
		j.JobID = j.Labels["id"]
	}
	zero, three := 0, 3
	r.Jobs[0].ExitStatus, r.Jobs[0].PeakRSS = &zero, 60<<20
	r.Jobs[2].ExitStatus, r.Jobs[2].PeakRSS = &zero, 10<<20 // at the floor: not counted
	// The failed job lasted a millisecond.
	r.Jobs[1].Ended = ptr(0.201)
	r.Jobs[1].ExitStatus = &three
	r.Totals.CommandRSSFloor = 16 << 20
	return r
}

// TestPoolPageItems renders a report of version 2 and checks what that
// version adds: a bar per item lifetime under its worker's lane, named,
// sized and coloured by why it went; jobs coloured by workflow entry with
// a legend; the failed job wide enough to see, and marked; the charts of
// the commands' memory instead of poolrun's own.
func TestPoolPageItems(t *testing.T) {
	r := testReportV2()
	var buf bytes.Buffer
	if err := renderPool(&buf, r, "r.json"); err != nil {
		t.Fatal(err)
	}
	html := parsePage(t, buf.Bytes())
	checkSelfContained(t, html, buf.Bytes())
	blocks := html.named("g", "worker-block")
	if len(blocks) != 2 {
		t.Fatalf("%d worker blocks", len(blocks))
	}
	for i, b := range blocks {
		w := r.Workers[i]
		items := b.named("g", "item")
		if len(items) != len(w.Items) {
			t.Errorf("worker %d: %d item bars, want %d", w.Index, len(items), len(w.Items))
			continue
		}
		for k, it := range w.Items {
			g := items[k]
			name := itemName(it.Name)
			if g.attrs["data-item"] != name {
				t.Errorf("worker %d item %d: data-item %q, want %q", w.Index, k, g.attrs["data-item"], name)
			}
			title := g.title()
			for _, want := range []string{name, human.Bytes(it.Bytes), "build started"} {
				if !strings.Contains(title, want) {
					t.Errorf("worker %d item %s: hover text %q lacks %q", w.Index, name, title, want)
				}
			}
			reason := it.EvictedBy
			if reason == "" {
				reason = "held"
				if !strings.Contains(title, "no eviction recorded") {
					t.Errorf("item %s: hover text %q", name, title)
				}
			} else if !strings.Contains(title, evictedBy(reason)) {
				t.Errorf("item %s: hover text %q does not say why it went", name, title)
			}
			held := g.named("rect", "item-held", reason)
			if len(held) != 1 {
				t.Errorf("item %s: no bar of class %q", name, reason)
				continue
			}
			// The bar spans the item's life on the time axis.
			tl := newTimeline(r)
			start, end := tl.itemSpan(it)
			x, _ := strconv.ParseFloat(held[0].attrs["x"], 64)
			wd, _ := strconv.ParseFloat(held[0].attrs["width"], 64)
			if math.Abs(x-tl.x(start)) > 0.1 || math.Abs(x+wd-tl.x(end)) > 2.1 {
				t.Errorf("item %s: bar from %v to %v, want %v to %v", name, x, x+wd, tl.x(start), tl.x(end))
			}
		}
		// Worker 1's ref (3.0 MiB over a third of the picture) is named
		// and sized in its bar.
		if i == 0 && !strings.Contains(b.allText(), "ref · 3.0 MiB") {
			t.Errorf("worker 1's items do not show ref's name and size: %q", b.allText())
		}
		// Version 2 draws no build or eviction marks and no RSS line
		// of poolrun's own; a worker whose commands were above the
		// floor has a memory area.
		if n := len(b.named("path", "build")) + len(b.named("path", "evict")) + len(b.named("path", "rss")); n != 0 {
			t.Errorf("worker %d: %d marks or RSS lines in a run report of version 2", w.Index, n)
		}
		mem := b.named("path", "cmdmem")
		if i == 0 && (len(mem) != 1 || !strings.Contains(mem[0].title(), "60.0 MiB")) {
			t.Errorf("worker 1: commands' memory %v, want one area up to 60.0 MiB", mem)
		}
		if i == 1 && len(mem) != 0 {
			t.Errorf("worker 2 ran no command above the floor, but has a memory area")
		}
	}

	// Jobs of one entry share a colour, and the legend names the entries.
	bars := jobBars(html)
	class := func(id int) string {
		fs := strings.Fields(bars[id][0].attrs["class"])
		return fs[len(fs)-1]
	}
	if class(1) == class(2) {
		t.Errorf("jobs of lines 5 and 9 share colour %s", class(1))
	}
	if tl := newTimeline(r); tl.groupOf[3] != tl.groupOf[4] || tl.groupOf[3] == tl.groupOf[1] {
		t.Errorf("jobs 3 and 4 (line 12) are not one group apart from job 1's")
	}
	if class(3) == class(1) || class(3) == class(2) {
		t.Errorf("job 3 (line 12) has the colour %s of another entry", class(3))
	}
	text := html.allText()
	for _, want := range []string{"jobs by workflow entry:", "prepare (line 5): 1", "broken (line 9): 1", "(line 12): 3", "evicted:", "budget 1", "died 1", "not recorded 1", "commands' memory"} {
		if !strings.Contains(text, want) {
			t.Errorf("the legend lacks %q", want)
		}
	}

	// The failed job of a millisecond is at least minFailedWidth wide, and
	// marked.
	failed := bars[2][0]
	if w, _ := strconv.ParseFloat(failed.attrs["width"], 64); w < minFailedWidth {
		t.Errorf("the failed job's bar is %v wide, want at least %v", w, minFailedWidth)
	}
	if marks := html.named("text", "failmark"); len(marks) != 1 {
		t.Errorf("%d failure marks, want 1", len(marks))
	}
	if title := failed.title(); !strings.Contains(title, "command: exit status 3") {
		t.Errorf("the failed job's hover text %q does not give its exit status", title)
	}
	if title := bars[1][0].title(); !strings.Contains(title, "command: exit status 0, peak RSS 60.0 MiB") {
		t.Errorf("job 1's hover text %q does not give its exit status and memory", title)
	}
	Totals := html.named("table", "totals")
	if len(Totals) != 1 || !strings.Contains(Totals[0].allText(), `60.0 MiB (job 1 "prepare")`) || !strings.Contains(Totals[0].allText(), "16.0 MiB") {
		t.Errorf("the totals do not give the largest command's peak RSS and poolrun's own")
	}
}

// TestPoolPageVersion1Fixture renders a report that poolrun wrote at
// version 1 (testdata/report-v1.json): every job drawn, builds and
// evictions as marks, the workers' RSS, no item bars.
func TestPoolPageVersion1Fixture(t *testing.T) {
	l, err := Load("testdata/report-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	r := l.Pool
	if r == nil || r.Version != 1 || len(r.Jobs) != 6 {
		t.Fatalf("the fixture: %+v", r)
	}
	var buf bytes.Buffer
	if err := Render(&buf, l, "report-v1.json"); err != nil {
		t.Fatal(err)
	}
	html := parsePage(t, buf.Bytes())
	bars := jobBars(html)
	for _, j := range r.Jobs {
		if len(bars[j.ID]) == 0 && len(html.all(func(n *node) bool { return n.attrs["data-job"] == strconv.Itoa(j.ID) })) == 0 {
			t.Errorf("job %d is not on the page", j.ID)
		}
	}
	if n := len(html.named("path", "build")); n == 0 {
		t.Error("no build marks on the page of a version 1 report")
	}
	if n := len(html.named("path", "rss")); n == 0 {
		t.Error("no RSS line on the page of a version 1 report")
	}
	if n := len(html.named("g", "item")); n != 0 {
		t.Errorf("%d item bars on the page of a version 1 report", n)
	}
	// And its trace.
	var trace bytes.Buffer
	if err := WriteTrace(&trace, r, "report-v1.json"); err != nil {
		t.Fatal(err)
	}
	checkTrace(t, trace.Bytes(), r)
}

// checkTrace checks that data is a trace of report r: a JSON object whose
// traceEvents hold a complete event per run of a job, on its worker, and
// begin and end pairs for every item; it returns the events.
func checkTrace(t *testing.T, data []byte, r *Pool) []traceEvent {
	t.Helper()
	var tf traceFile
	if err := json.Unmarshal(data, &tf); err != nil {
		t.Fatalf("the trace is not JSON: %v", err)
	}
	runs := map[int]int{} // complete events per job
	open := map[string]int{}
	items := 0
	for _, e := range tf.TraceEvents {
		switch e.Ph {
		case "X":
			job := int(e.Args["job"].(float64))
			runs[job]++
			if e.Dur == nil || *e.Dur < 0 || e.Ts < 0 {
				t.Errorf("job %d: ts %v, dur %v", job, e.Ts, e.Dur)
			}
		case "b":
			open[e.ID+"/"+e.Name]++
			if e.Name != "build" {
				items++
			}
		case "e":
			open[e.ID+"/"+e.Name]--
		}
	}
	for _, j := range r.Jobs {
		want := len(j.Attempts)
		if want == 0 && j.Begin() != nil {
			want = 1
		}
		if runs[j.ID] != want {
			t.Errorf("job %d: %d complete events, want %d", j.ID, runs[j.ID], want)
		}
	}
	for k, n := range open {
		if n != 0 {
			t.Errorf("async span %s: %d begins more than ends", k, n)
		}
	}
	wantItems := 0
	for _, w := range r.Workers {
		wantItems += len(w.Items)
	}
	if items != wantItems {
		t.Errorf("%d item spans, want %d", items, wantItems)
	}
	return tf.TraceEvents
}

// TestTrace writes the trace of a version 2 report: every run a complete
// event of its worker's process, every item a span, counters for the
// cache and the commands' memory.
func TestTrace(t *testing.T) {
	r := testReportV2()
	var buf bytes.Buffer
	if err := WriteTrace(&buf, r, "r.json"); err != nil {
		t.Fatal(err)
	}
	evs := checkTrace(t, buf.Bytes(), r)
	counters := map[string]bool{}
	for _, e := range evs {
		if e.Ph == "C" {
			counters[e.Name] = true
		}
		if e.Ph == "X" && int(e.Args["job"].(float64)) == 1 && e.Pid != 1 {
			t.Errorf("job 1 on process %d, want worker 1", e.Pid)
		}
	}
	if !counters["cache bytes"] || !counters["memory"] {
		t.Errorf("counters %v, want cache bytes and memory", counters)
	}
}

// TestItemName: the page names a workflow item by its name in the
// workflow, a worker program as "worker NAME", another item by its cache
// name less a hash at its end.
func TestItemName(t *testing.T) {
	for in, want := range map[string]string{
		"poolrun.item:ref@0123456789abcdef":  "ref",
		"poolrun.worker:py@0123456789abcdef": "worker py",
		"scaffold.index:granule":             "scaffold.index:granule",
		"family:member@0123456789abcdef":     "family:member",
		"poolrun.worker:py@not-a-hash":       "poolrun.worker:py@not-a-hash",
	} {
		if got := itemName(in); got != want {
			t.Errorf("itemName(%q) = %q, want %q", in, got, want)
		}
	}
}
