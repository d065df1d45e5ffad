package cli

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/poolrun/poolrun/internal/execflow"
)

// The page of a report is one HTML file with its CSS and SVG inline and no
// script. It is written as well-formed XML (every element closed, every
// text escaped by esc), so that a test can parse it whole with
// encoding/xml.

// pageStyle is the page's CSS. The status colours are of the Okabe–Ito
// palette, which people with any common colour blindness tell apart.
const pageStyle = `
:root { --succeeded: #009E73; --failed: #D55E00; --cancelled: #A0A0A0; --aborted: #CC79A7;
  --skipped: #56B4E9; --other: #404040; --cache: #0072B2; --rss: #333; --evict: #E69F00; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222;
  margin: 20px 28px 40px; background: #fff; }
h1 { font-size: 21px; margin: 0 0 2px; }
h2 { font-size: 16px; margin: 26px 0 8px; }
.meta { color: #555; margin: 0 0 10px; }
.meta b { color: #222; font-weight: 600; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 18px; align-items: center; margin: 6px 0 4px; font-size: 13px; }
.legend span { display: inline-flex; align-items: center; gap: 6px; }
.sw { width: 14px; height: 14px; border-radius: 3px; display: inline-block; }
.sw.line { height: 0; border-top: 2px solid var(--rss); border-radius: 0; width: 16px; }
.sw.area { background: rgba(0, 114, 178, 0.35); border-top: 2px solid var(--cache); border-radius: 0; height: 10px; }
.mark { font-size: 12px; }
.hint { color: #666; font-size: 12.5px; margin: 2px 0 8px; }
.note { background: #fff8e6; border-left: 4px solid var(--evict); padding: 8px 12px; margin: 10px 0; max-width: 980px; }
svg.timeline, svg.bars { width: 100%; height: auto; display: block; }
svg text { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; font-size: 11px; fill: #333; }
svg text.worker { font-size: 13px; font-weight: 600; fill: #222; }
svg text.small { font-size: 10px; fill: #666; }
svg text.in { font-size: 10px; fill: #fff; pointer-events: none; }
svg .grid { stroke: #e6e6e6; stroke-width: 1; }
svg .lane { fill: #f3f3f3; }
svg .chart { fill: #fbfbfb; stroke: #dddddd; }
svg .job:hover, svg .notrun:hover { stroke: #000; stroke-width: 1.5; }
svg .alt { fill-opacity: 0.72; }
svg .succeeded { fill: var(--succeeded); } svg .failed { fill: var(--failed); }
svg .cancelled { fill: var(--cancelled); } svg .aborted { fill: var(--aborted); }
svg .skipped { fill: var(--skipped); } svg .other { fill: var(--other); }
svg .cache { fill: rgba(0, 114, 178, 0.30); stroke: var(--cache); stroke-width: 1.2; }
svg .rss { fill: none; stroke: var(--rss); stroke-width: 1.3; stroke-dasharray: 4 2; }
svg .build { fill: var(--cache); stroke: #fff; stroke-width: 0.6; }
svg .evict { fill: var(--evict); stroke: #fff; stroke-width: 0.6; }
svg .bar1 { fill: var(--cache); } svg .bar2 { fill: #8c8c8c; }
svg .job.failed { stroke: var(--failed); stroke-width: 2; }
svg .job.aborted { stroke: var(--aborted); stroke-width: 1.5; stroke-dasharray: 3 2; }
svg .job.cancelled, svg .job.skipped { fill-opacity: 0.35; }
svg .job.other { fill-opacity: 0.5; stroke: var(--other); stroke-dasharray: 2 2; }
svg text.failmark { font-size: 11px; font-weight: 700; fill: var(--failed); pointer-events: none; }
svg .itemlane { fill: #f8f8f8; }
svg .item-held { fill-opacity: 0.55; } svg .item:hover rect { stroke: #000; stroke-width: 1; }
svg .item-held.policy { fill: var(--cache); } svg .item-held.budget { fill: var(--evict); }
svg .item-held.end { fill: #8c8c8c; } svg .item-held.died { fill: var(--aborted); } svg .item-held.held { fill: #c8c8c8; }
svg .item-build { fill: #123; fill-opacity: 0.75; }
svg text.itemname { font-size: 9.5px; fill: #111; pointer-events: none; }
svg .cmdmem { fill: rgba(85, 85, 85, 0.12); stroke: #555; stroke-width: 1.3; }
.sw.item { background: rgba(0, 114, 178, 0.55); border-left: 4px solid #123; border-radius: 0; width: 18px; height: 10px; }
.sw.mem { background: rgba(85, 85, 85, 0.12); border-top: 2px solid #555; border-radius: 0; height: 10px; }
.sw.failedmark { background: #fff; border: 2px solid var(--failed); }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; margin: 4px 0 8px; }
th, td { padding: 3px 10px; text-align: right; border-bottom: 1px solid #eaeaea; vertical-align: top; white-space: nowrap; }
th { background: #f5f5f5; font-weight: 600; }
th:first-child, td:first-child, th.text { text-align: left; }
td.text { text-align: left; max-width: 640px; white-space: pre-wrap; word-break: break-word; }
table.runs td.text { white-space: nowrap; }
tr.median td { font-weight: 600; background: #f7fbff; }
table.totals td:first-child { color: #555; }
table.totals td:last-child { text-align: left; font-weight: 600; }
details { margin: 8px 0; }
pre { background: #f6f6f6; padding: 8px 10px; overflow: auto; max-height: 360px; font-size: 12px; }
footer { color: #888; font-size: 12px; margin-top: 28px; }
`

// The statuses as the page colours them, in legend order; other is every
// status a job has when the pool stopped before it ended.
var pageStatuses = []string{"succeeded", "failed", "cancelled", "aborted", "skipped"}

// statusClass is the CSS class of a job's status.
func statusClass(status string) string {
	if slices.Contains(pageStatuses, status) {
		return status
	}
	return "other"
}

// esc escapes s for XML text and attribute values alike; characters XML
// cannot hold (control characters, invalid UTF-8) become U+FFFD.
func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// page is a page being written.
type page struct {
	strings.Builder
}

func (p *page) f(format string, args ...any) { fmt.Fprintf(p, format, args...) }

// head opens the page with its title and style.
func (p *page) head(title string) {
	p.f("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n")
	p.f("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n")
	p.f("<title>%s</title>\n<style>%s%s</style>\n</head>\n<body>\n", esc(title), pageStyle, groupStyle())
}

// foot closes the page.
func (p *page) foot(src string) {
	p.f("<footer>Made by poolrun report from %s. The report's fields are described in poolrun's docs/REPORT.md.</footer>\n</body>\n</html>\n", esc(src))
}

// Geometry of the timeline, in the SVG's own units (about pixels).
const (
	svgWidth = 1300.0
	gutter   = 138.0 // left of the plot: the workers' names, the charts' scales
	rightPad = 22.0
	plotW    = svgWidth - gutter - rightPad
	axisH    = 26.0 // the time axis above the lanes
	laneH    = 26.0 // a worker's job bars
	chartH   = 76.0 // a worker's cache and RSS under its bars
	chartGap = 4.0  // between the bars and the chart
	blockGap = 20.0 // between workers
	notRunH  = 16.0 // the lane of the jobs that never ran
	maxRows  = 3    // sub-rows of a lane where a worker's runs overlap
)

// timeline is the geometry of a pool report's picture.
type timeline struct {
	r    *report
	t0   time.Time // time 0: when the pool started
	span float64   // the seconds shown
	// groups colour the jobs' bars (see jobGroups).
	groups  []*jobGroup
	groupOf map[int]*jobGroup
}

// newTimeline places t0 at the pool's start (for a report without one, the
// first job's queueing) and spans to the last thing that happened.
func newTimeline(r *report) *timeline {
	tl := &timeline{r: r, t0: r.Started}
	if tl.t0.IsZero() {
		for _, j := range r.Jobs {
			if tl.t0.IsZero() || j.Added.Before(tl.t0) {
				tl.t0 = j.Added
			}
		}
	}
	end := r.Totals.WallSeconds
	for _, j := range r.Jobs {
		if j.Ended != nil {
			end = max(end, tl.sec(*j.Ended))
		}
		for _, a := range j.Attempts {
			end = max(end, tl.sec(a.Ended))
		}
	}
	for _, w := range r.Workers {
		if n := len(w.Samples); n > 0 {
			end = max(end, w.Samples[n-1].T)
		}
	}
	for _, w := range r.Workers {
		for _, it := range w.Items {
			if it.Evicted != nil {
				end = max(end, tl.sec(*it.Evicted))
			}
		}
	}
	if !(end > 0) {
		end = 1
	}
	tl.span = end
	tl.groups, tl.groupOf = jobGroups(r)
	return tl
}

// sec is t in seconds since t0.
func (tl *timeline) sec(t time.Time) float64 { return t.Sub(tl.t0).Seconds() }

// x is the abscissa of s seconds since t0.
func (tl *timeline) x(s float64) float64 {
	return gutter + min(max(s, 0), tl.span)/tl.span*plotW
}

// bar is one run of a job on a worker, drawn from when it began to when it
// ended.
type bar struct {
	job *jobRecord
	// start is when the run began: its started time, or its sent time
	// where it has none (a run that never began; a report of an older
	// poolrun, whose started is the send time); end is when it ended.
	// Both are in seconds since t0.
	start, end float64
	// sent and started are the run's times as the report gives them, in
	// seconds since t0; NaN where it does not.
	sent, started float64
	status        string
	attempt       int // from 1; 0 for a job that ran once
	err           string
	open          bool // no end recorded: the bar runs to the end of the picture
}

// secOf is t in seconds since t0, NaN for nil or the zero time (a time
// the report does not give).
func (tl *timeline) secOf(t *time.Time) float64 {
	if t == nil || t.IsZero() {
		return math.NaN()
	}
	return tl.sec(*t)
}

// bars returns the runs of the report's jobs by worker, in order of start,
// and the jobs that never ran.
func (tl *timeline) bars() (byWorker map[int][]bar, notRun []*jobRecord) {
	byWorker = map[int][]bar{}
	for _, j := range tl.r.Jobs {
		switch {
		case len(j.Attempts) > 0:
			for i, a := range j.Attempts {
				byWorker[a.Worker] = append(byWorker[a.Worker], bar{job: j, start: tl.sec(a.begin()), end: tl.sec(a.Ended),
					sent: tl.secOf(&a.Sent), started: tl.secOf(a.Started), status: a.Status, attempt: i + 1, err: a.Error})
			}
		case j.begin() != nil:
			b := bar{job: j, start: tl.sec(*j.begin()), end: tl.span, sent: tl.secOf(j.Sent), started: tl.secOf(j.Started),
				status: j.Status, err: j.Error, open: j.Ended == nil}
			if j.Ended != nil {
				b.end = tl.sec(*j.Ended)
			}
			byWorker[j.Worker] = append(byWorker[j.Worker], b)
		default:
			notRun = append(notRun, j)
		}
	}
	for _, bs := range byWorker {
		slices.SortStableFunc(bs, func(a, b bar) int {
			if a.start != b.start {
				return cmpFloat(a.start, b.start)
			}
			return a.job.ID - b.job.ID
		})
	}
	return byWorker, notRun
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// pageJobName is how the page names a job in a line: its number, and its
// workflow id where it has one.
func pageJobName(j *jobRecord) string {
	if id, ok := j.Labels[execflow.LabelID]; ok {
		return fmt.Sprintf("job %d %q", j.ID, id)
	}
	return fmt.Sprintf("job %d", j.ID)
}

// shortName is what fits inside a job's bar: its workflow id, or its
// function's short name and its labels' values.
func shortName(j *jobRecord) string {
	if id, ok := j.Labels[execflow.LabelID]; ok {
		return id
	}
	name := j.Func
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	parts := []string{name}
	for _, k := range sortedKeys(j.Labels) {
		parts = append(parts, j.Labels[k])
	}
	return strings.Join(parts, " ")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// labelLine lists a job's labels as k=v, by key.
func labelLine(labels map[string]string) string {
	var parts []string
	for _, k := range sortedKeys(labels) {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ", ")
}

// clip shortens s to at most n bytes (on a rune boundary), marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// secs shows s seconds since t0 to the millisecond.
func secs(s float64) string { return strconv.FormatFloat(s, 'f', 3, 64) + " s" }

// barTitle is the hover text of a job's bar.
func barTitle(b bar) string {
	j := b.job
	lines := []string{pageJobName(j) + ": " + j.Func}
	if l := labelLine(j.Labels); l != "" {
		lines = append(lines, l)
	}
	st := b.status
	if b.attempt > 0 {
		st = fmt.Sprintf("attempt %d of %d: %s", b.attempt, len(j.Attempts), b.status)
	}
	lines = append(lines, st)
	var times []string
	switch sent, started := !math.IsNaN(b.sent), !math.IsNaN(b.started); {
	case sent && started:
		times = []string{"sent " + secs(b.sent), "started " + secs(b.started)}
	case sent:
		times = []string{"sent " + secs(b.sent), "not started"}
	default:
		// Started only: a report of an older poolrun says no more (and
		// means the send time); neither: a run with no times at all.
		times = []string{"started " + secs(b.start)}
	}
	if b.open {
		times = append(times, "no end recorded")
	} else {
		times = append(times, fmt.Sprintf("ended %s: %s", secs(b.end), roundDur(secondsDur(b.end-b.start))))
	}
	lines = append(lines, strings.Join(times, ", "))
	if last := b.attempt == 0 || b.attempt == len(j.Attempts); last {
		lines = append(lines, commandLine(j)...)
	}
	if b.err != "" {
		lines = append(lines, "error: "+clip(b.err, 600))
	}
	return strings.Join(lines, "\n")
}

// notRunTitle is the hover text of a job that never ran.
func notRunTitle(tl *timeline, j *jobRecord) string {
	lines := []string{pageJobName(j) + ": " + j.Func}
	if l := labelLine(j.Labels); l != "" {
		lines = append(lines, l)
	}
	lines = append(lines, j.Status+", never ran")
	if j.Ended != nil {
		lines = append(lines, "ended "+secs(tl.sec(*j.Ended)))
	}
	if j.Error != "" {
		lines = append(lines, "error: "+clip(j.Error, 600))
	}
	return strings.Join(lines, "\n")
}

// niceTimeStep is a step between time ticks near raw seconds: 1, 2 or 5
// times a power of ten below a minute, whole minutes or hours above.
func niceTimeStep(raw float64) float64 {
	if raw >= 45 {
		for _, s := range []float64{60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400} {
			if s >= raw {
				return s
			}
		}
		return 86400 * math.Ceil(raw/86400)
	}
	return nice125(raw)
}

// nice125 is the least of 1, 2, 5 times a power of ten that is at least v
// (v > 0).
func nice125(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// tickLabel shows a tick at t seconds of a scale whose step is step.
func tickLabel(t, step float64) string {
	if step >= 60 {
		d := time.Duration(math.Round(t)) * time.Second
		h, m := int(d.Hours()), int(d.Minutes())%60
		switch {
		case h > 0 && m == 0:
			return fmt.Sprintf("%dh", h)
		case h > 0:
			return fmt.Sprintf("%dh%02dm", h, m)
		}
		return fmt.Sprintf("%dm", m)
	}
	decimals := max(0, int(math.Ceil(-math.Log10(step)-1e-9)))
	s := strconv.FormatFloat(t, 'f', decimals, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s + " s"
}

// niceBytes is a round number of bytes at least n, for a chart's top: 1,
// 1.25, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten of B, KiB, MiB,
// GiB or TiB; 1 MiB for nothing.
func niceBytes(n int64) int64 {
	if n <= 0 {
		return 1 << 20
	}
	unit := int64(1)
	for unit < 1<<40 && n >= unit*1024 {
		unit *= 1024
	}
	v := float64(n) / float64(unit)
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8} {
		if m*p >= v {
			return int64(math.Ceil(m * p * float64(unit)))
		}
	}
	return int64(math.Ceil(10 * p * float64(unit)))
}

// f1 shows a coordinate to a tenth of a unit.
func f1(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

// svg draws the timeline: a time axis, then per worker its lane of job
// bars and its chart of cache bytes and RSS over time with its builds and
// evictions, then the lane of the jobs that never ran.
func (tl *timeline) svg(p *page) {
	byWorker, notRun := tl.bars()
	// Workers that ran jobs but have no entry (a report cut short) still
	// get a lane.
	workers := slices.Clone(tl.r.Workers)
	for idx := range byWorker {
		if !slices.ContainsFunc(workers, func(w workerReport) bool { return w.Index == idx }) {
			workers = append(workers, workerReport{Index: idx})
		}
	}
	slices.SortFunc(workers, func(a, b workerReport) int { return a.Index - b.Index })

	var top int64 // the charts' common scale
	cmdMem := commandsMemory(tl.r)
	for _, w := range workers {
		for _, s := range w.Samples {
			top = max(top, s.CacheBytes)
			if !cmdMem {
				top = max(top, s.RSS)
			}
		}
		if cmdMem {
			top = max(top, maxStep(tl.commandSteps(byWorker[w.Index])).v)
		}
	}
	top = niceBytes(top)

	height := axisH + 22
	for _, w := range workers {
		height += laneH + tl.itemsHeight(w.Items) + chartGap + chartH + blockGap
	}
	if len(notRun) > 0 {
		height += notRunH + blockGap
	}
	p.f("<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %s %s\" role=\"img\" aria-label=\"%s\">\n",
		f1(svgWidth), f1(height), esc("timeline of the jobs on each worker, with each worker's cache and memory over time"))

	// Time axis: labels above and below, grid lines through the lanes.
	step := niceTimeStep(tl.span / 10)
	if !(step > 0) || tl.span/step > 100 { // a span too small for floats
		step = tl.span
	}
	bottom := height - 22
	p.f("<g class=\"axis\">\n")
	for i := 0; float64(i)*step <= tl.span*(1+1e-9); i++ {
		t := float64(i) * step
		x := f1(tl.x(t))
		p.f("<line class=\"grid\" x1=\"%s\" x2=\"%s\" y1=\"%s\" y2=\"%s\"/>", x, x, f1(axisH-6), f1(bottom))
		anchor := "middle"
		if t == 0 {
			anchor = "start"
		}
		label := esc(tickLabel(t, step))
		p.f("<text x=\"%s\" y=\"14\" text-anchor=\"%s\">%s</text>", x, anchor, label)
		p.f("<text x=\"%s\" y=\"%s\" text-anchor=\"%s\">%s</text>\n", x, f1(bottom+14), anchor, label)
	}
	p.f("<text class=\"small\" x=\"8\" y=\"14\">time since start</text>\n</g>\n")

	y := axisH
	serial := tl.r.Options.Workers == 0
	for _, w := range workers {
		tl.workerBlock(p, w, byWorker[w.Index], y, top, serial)
		y += laneH + tl.itemsHeight(w.Items) + chartGap + chartH + blockGap
	}
	if len(notRun) > 0 {
		p.f("<g class=\"notrun-lane\">\n<text class=\"worker\" x=\"8\" y=\"%s\">not run</text>", f1(y+12))
		p.f("<text class=\"small\" x=\"72\" y=\"%s\">%d job%s</text>\n", f1(y+12), len(notRun), plural(len(notRun)))
		p.f("<rect class=\"lane\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\"/>\n", f1(gutter), f1(y), f1(plotW), f1(notRunH))
		for _, j := range notRun {
			t := tl.span
			if j.Ended != nil {
				t = tl.sec(*j.Ended)
			}
			x := min(tl.x(t), gutter+plotW-3)
			p.f("<rect class=\"notrun %s\" data-job=\"%d\" x=\"%s\" y=\"%s\" width=\"3\" height=\"%s\"><title>%s</title></rect>\n",
				statusClass(j.Status), j.ID, f1(x), f1(y+2), f1(notRunH-4), esc(notRunTitle(tl, j)))
		}
		p.f("</g>\n")
	}
	p.f("</svg>\n")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// workerBlock draws one worker's lane of job bars at y, and its chart under
// it on a scale of top bytes.
func (tl *timeline) workerBlock(p *page, w workerReport, bars []bar, y float64, top int64, serial bool) {
	p.f("<g class=\"worker-block\" data-worker=\"%d\">\n", w.Index)
	p.f("<text class=\"worker\" x=\"8\" y=\"%s\">worker %d</text>\n", f1(y+13), w.Index)
	var who string
	switch {
	case serial:
		who = "serial: poolrun itself"
	case w.PID > 0 && w.Host != "":
		who = fmt.Sprintf("pid %d on %s", w.PID, w.Host)
	case w.PID > 0:
		who = fmt.Sprintf("pid %d", w.PID)
	}
	if who != "" {
		p.f("<text class=\"small\" x=\"8\" y=\"%s\">%s</text>\n", f1(y+25), esc(who))
	}
	jobs := fmt.Sprintf("%d job%s", w.Jobs, plural(w.Jobs))
	if w.Restarts > 0 {
		jobs += fmt.Sprintf(", %d restart%s", w.Restarts, plural(w.Restarts))
	}
	p.f("<text class=\"small\" x=\"8\" y=\"%s\">%s</text>\n", f1(y+37), esc(jobs))
	p.f("<rect class=\"lane\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\"/>\n", f1(gutter), f1(y), f1(plotW), f1(laneH))

	// Runs that overlap go to sub-rows: those drawn from when they were
	// sent (a report of an older poolrun, a run that never began) while
	// the one before still ran.
	rowEnd := []float64{}
	rows := make([]int, len(bars))
	for i, b := range bars {
		r := slices.IndexFunc(rowEnd, func(end float64) bool { return end <= b.start })
		if r < 0 {
			if len(rowEnd) < maxRows {
				rowEnd = append(rowEnd, 0)
				r = len(rowEnd) - 1
			} else {
				r = maxRows - 1
			}
		}
		rowEnd[r] = max(rowEnd[r], b.end)
		rows[i] = r
	}
	rowH := (laneH - 2) / float64(max(len(rowEnd), 1))
	// Runs that did not succeed are drawn last, over the others: where
	// bars are narrower than a pixel, failures still show.
	order := make([]int, 0, len(bars))
	for pass := range 2 {
		for i, b := range bars {
			if (b.status == "succeeded") == (pass == 0) {
				order = append(order, i)
			}
		}
	}
	for _, i := range order {
		b := bars[i]
		x0, x1 := tl.x(b.start), tl.x(b.end)
		width := max(x1-x0, 1)
		failed := b.status == "failed"
		if failed {
			// A failure of a few milliseconds still shows.
			width = max(width, minFailedWidth)
		}
		by := y + 1 + float64(rows[i])*rowH
		// The group's colour comes after the status's in the style, and
		// wins: the status shows as an outline or a paler bar.
		class := "job " + statusClass(b.status) + " " + tl.groupClass(b.job)
		if i%2 == 1 {
			class += " alt"
		}
		p.f("<rect class=\"%s\" data-job=\"%d\" data-status=\"%s\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\"><title>%s</title></rect>\n",
			class, b.job.ID, esc(b.status), f1(x0), f1(by), f1(width), f1(rowH), esc(barTitle(b)))
		if failed {
			p.f("<text class=\"failmark\" x=\"%s\" y=\"%s\" text-anchor=\"middle\">✕</text>\n", f1(x0+width/2), f1(y-1.5))
		}
		if name := shortName(b.job); rowH >= 12 && width >= float64(len(name))*6+8 {
			p.f("<text class=\"in\" x=\"%s\" y=\"%s\">%s</text>\n", f1(x0+4), f1(by+rowH/2+3.5), esc(name))
		}
	}
	tl.drawItems(p, w, y+laneH)

	// The chart: cache bytes (area, a step as the worker reports after each
	// job); RSS (dashed line, broken where unknown), or for a run report
	// of version 2 the commands' memory (area); in a report without items,
	// builds (▲ at the bottom) and evictions (▼ at the top).
	cy := y + laneH + tl.itemsHeight(w.Items) + chartGap
	cb := cy + chartH // the chart's bottom
	yOf := func(v int64) float64 { return cb - float64(v)/float64(top)*(chartH-2) }
	p.f("<rect class=\"chart\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\"/>\n", f1(gutter), f1(cy), f1(plotW), f1(chartH))
	p.f("<line class=\"grid\" x1=\"%s\" x2=\"%s\" y1=\"%s\" y2=\"%s\"/>\n", f1(gutter), f1(gutter+plotW), f1(yOf(top/2)), f1(yOf(top/2)))
	p.f("<text x=\"%s\" y=\"%s\" text-anchor=\"end\">%s</text>", f1(gutter-6), f1(cy+9), esc(humanBytes(top)))
	p.f("<text class=\"small\" x=\"%s\" y=\"%s\" text-anchor=\"end\">%s</text>", f1(gutter-6), f1(yOf(top/2)+4), esc(humanBytes(top/2)))
	p.f("<text x=\"%s\" y=\"%s\" text-anchor=\"end\">0</text>\n", f1(gutter-6), f1(cb))
	ss := w.Samples
	if len(ss) == 0 {
		why := "no samples of cache and memory in this report"
		if tl.r.Version == 0 {
			why += " (version 0: written before poolrun sampled them)"
		}
		p.f("<text class=\"small\" x=\"%s\" y=\"%s\">%s</text>\n</g>\n", f1(gutter+10), f1(cy+chartH/2+4), esc(why))
		return
	}
	var d strings.Builder
	fmt.Fprintf(&d, "M%s %sV%s", f1(tl.x(ss[0].T)), f1(cb), f1(yOf(ss[0].CacheBytes)))
	for _, s := range ss[1:] {
		fmt.Fprintf(&d, "H%sV%s", f1(tl.x(s.T)), f1(yOf(s.CacheBytes)))
	}
	fmt.Fprintf(&d, "V%sZ", f1(cb))
	var peak sample
	for _, s := range ss {
		if s.CacheBytes > peak.CacheBytes {
			peak = s
		}
	}
	p.f("<path class=\"cache\" d=\"%s\"><title>%s</title></path>\n", d.String(),
		esc(fmt.Sprintf("worker %d's cache: at most %s (at %s)", w.Index, humanBytes(peak.CacheBytes), secs(peak.T))))
	if commandsMemory(tl.r) {
		tl.commandsLine(p, w, bars, yOf, cb)
	} else {
		rssLine(p, tl, w, ss, yOf)
	}
	if len(w.Items) > 0 || tl.r.Version >= 2 {
		// The items' own bars say which was built and evicted when.
		p.f("</g>\n")
		return
	}
	for _, s := range ss {
		x := tl.x(s.T)
		if s.Builds > 0 {
			p.f("<path class=\"build\" d=\"M%s %sl4.5 -8l4.5 8Z\"><title>%s</title></path>\n", f1(x-4.5), f1(cb),
				esc(fmt.Sprintf("%d item%s built (counted at %s; cache %s)", s.Builds, plural(int(s.Builds)), secs(s.T), humanBytes(s.CacheBytes))))
		}
		if s.Evictions > 0 {
			p.f("<path class=\"evict\" d=\"M%s %sl4.5 8l4.5 -8Z\"><title>%s</title></path>\n", f1(x-4.5), f1(cy),
				esc(fmt.Sprintf("%d item%s evicted (counted at %s; cache %s)", s.Evictions, plural(int(s.Evictions)), secs(s.T), humanBytes(s.CacheBytes))))
		}
	}
	p.f("</g>\n")
}

// renderPoolPage writes the page of a pool's report r, read from the file
// named src: a heading, the legend, the timeline, the tables of the
// totals, the workers and the jobs that did not succeed, and the
// command's result.
func renderPoolPage(w io.Writer, r *report, src string) error {
	var p page
	title := "poolrun report: " + r.Command
	p.head(title)
	p.f("<h1>%s</h1>\n", esc(title))
	tl := newTimeline(r)

	var meta []string
	if !tl.t0.IsZero() {
		meta = append(meta, "started <b>"+esc(tl.t0.Local().Format("2006-01-02 15:04:05 MST"))+"</b>")
	}
	switch n := r.Options.Workers; n {
	case 0:
		meta = append(meta, "<b>serial</b> (no workers)")
	default:
		meta = append(meta, fmt.Sprintf("<b>%d</b> worker%s", n, plural(n)))
	}
	meta = append(meta, "wall time <b>"+esc(roundDur(secondsDur(r.Totals.WallSeconds)))+"</b>")
	meta = append(meta, fmt.Sprintf("<b>%d</b> job%s", r.Totals.Jobs, plural(r.Totals.Jobs)))
	meta = append(meta, esc(poolOptions(r.Options)))
	meta = append(meta, fmt.Sprintf("report version %d, from %s", r.Version, esc(src)))
	p.f("<p class=\"meta\">%s</p>\n", strings.Join(meta, " · "))

	// The legend: each status with its count, then the chart's marks.
	counts := map[string]int{}
	for _, j := range r.Jobs {
		counts[statusClass(j.Status)]++
	}
	pageLegend(&p, r, tl, counts)
	tl.svg(&p)

	p.f("<h2>Totals</h2>\n")
	totalsTable(&p, r)
	p.f("<h2>Workers</h2>\n")
	workersTable(&p, r)
	unsuccessful(&p, r)
	if r.Extra != nil {
		data, err := json.MarshalIndent(r.Extra, "", "  ")
		if err == nil {
			p.f("<details><summary>The command's result</summary><pre>%s</pre></details>\n", esc(string(data)))
		}
	}
	p.foot(src)
	_, err := io.WriteString(w, p.String())
	return err
}

// pageLegend writes the legend above the timeline: the jobs' colours (by
// workflow entry or function), their statuses with their counts (counts),
// the items' bars and the charts, and how to read them.
func pageLegend(p *page, r *report, tl *timeline, counts map[string]int) {
	by := "function"
	if slices.ContainsFunc(r.Jobs, func(j *jobRecord) bool { return j.Line > 0 }) {
		by = "workflow entry"
	}
	p.f("<div class=\"legend\"><b>jobs by %s:</b>", by)
	for i, g := range tl.groups {
		if i == maxLegendGroups {
			p.f("<span>and %d more</span>", len(tl.groups)-i)
			break
		}
		p.f("<span><i class=\"sw %s\"></i>%s: %d</span>", g.class, esc(g.name), g.jobs)
	}
	p.f("</div>\n<div class=\"legend\"><b>status:</b>")
	for _, st := range append(slices.Clone(pageStatuses), "other") {
		if st == "other" && counts[st] == 0 {
			continue
		}
		name := st
		if st == "other" {
			name = "unfinished"
		}
		mark := ""
		switch st {
		case "failed":
			mark = " (red outline and ✕)"
		case "aborted":
			mark = " (dashed outline)"
		case "cancelled", "skipped", "other":
			mark = " (pale)"
		}
		p.f("<span><i class=\"sw\" style=\"background: var(--%s)\"></i>%s %d%s</span>", st, name, counts[st], mark)
	}
	p.f("</div>\n<div class=\"legend\">")
	reasons := map[string]int{}
	for _, w := range r.Workers {
		for _, it := range w.Items {
			if slices.Contains(itemReasons, it.EvictedBy) {
				reasons[it.EvictedBy]++
			} else {
				reasons["held"]++
			}
		}
	}
	hasItems := len(reasons) > 0
	if hasItems {
		p.f("<span><i class=\"sw item\"></i>an item: its build (dark), then held until evicted</span><b>evicted:</b>")
		for _, reason := range itemReasons {
			name := reason
			if reason == "held" {
				name = "not recorded"
			}
			if reasons[reason] > 0 {
				p.f("<span><svg width=\"16\" height=\"10\"><rect class=\"item-held %s\" width=\"16\" height=\"10\"/></svg>%s %d</span>", reason, name, reasons[reason])
			}
		}
	}
	p.f("<span><i class=\"sw area\"></i>cache bytes</span>")
	if commandsMemory(r) {
		p.f("<span><i class=\"sw mem\"></i>commands' memory (the sum of the peak RSS of the commands running)</span>")
	} else {
		p.f("<span><i class=\"sw line\"></i>resident memory (RSS)</span>")
	}
	if !hasItems && r.Version < 2 {
		p.f("<span><b class=\"mark\" style=\"color: var(--cache)\">▲</b>items built</span><span><b class=\"mark\" style=\"color: var(--evict)\">▼</b>items evicted</span>")
	}
	p.f("</div>\n")
	hint := "A bar runs from when the job began on its worker (from when it was sent, for a run that never began and in a report of an older poolrun) to when it ended; hover over it for the job's id, function, labels, times and error. A failed job's bar is at least a few pixels wide, whatever its duration. "
	if hasItems || r.Version >= 2 {
		hint += "Under each worker's jobs, a bar per item it built, from the start of its build to its eviction; hover for its size, times and why it went. "
	} else {
		hint += fmt.Sprintf("A worker reports its cache after each job, so a build or eviction shows at the first sample (every %s) after the job that made it. ", sampleEvery(r.SampleSeconds))
	}
	hint += "The chart under them: the worker's cache bytes as it reported them"
	if commandsMemory(r) {
		floor := ""
		if f := r.Totals.CommandRSSFloor; f > 0 {
			floor = fmt.Sprintf(" Commands whose peak was at most poolrun's own (%s) count nothing: Linux counts poolrun's memory in each command's peak, so theirs is not known.", humanBytes(f))
		}
		hint += ", and the memory of its commands: while a command runs, its peak RSS counts (wait4's ru_maxrss), summed over the commands running." + floor
	} else {
		hint += ", and its process's resident memory over time; the last sample is taken after the pool ended, with the caches cleared."
	}
	p.f("<p class=\"hint\">%s</p>\n", esc(hint))
}

// maxLegendGroups bounds the groups the legend names.
const maxLegendGroups = 24

// sampleEvery says how often samples were taken.
func sampleEvery(s float64) string {
	if s <= 0 {
		return "100 ms"
	}
	return roundDur(secondsDur(s))
}

// poolOptions says how the pool held items.
func poolOptions(o poolSettings) string {
	parts := []string{"evict " + o.Evict}
	if o.Evict == "" {
		parts = parts[:0]
	}
	if o.Affinity {
		parts = append(parts, "affinity")
	}
	if o.IdleEviction {
		parts = append(parts, "idle eviction")
	}
	if o.CacheBudget > 0 {
		parts = append(parts, "budget "+humanBytes(o.CacheBudget)+" per worker")
	}
	if o.Retries > 0 {
		parts = append(parts, fmt.Sprintf("%d retries", o.Retries))
	}
	if o.TimeoutSeconds > 0 {
		parts = append(parts, "timeout "+roundDur(secondsDur(o.TimeoutSeconds)))
	}
	return strings.Join(parts, ", ")
}

// totalsTable shows the pool's figures.
func totalsTable(p *page, r *report) {
	t := r.Totals
	var byStatus []string
	for _, st := range append(slices.Clone(pageStatuses), "pending", "queued", "running") {
		if n := t.ByStatus[st]; n > 0 {
			byStatus = append(byStatus, fmt.Sprintf("%d %s", n, st))
		}
	}
	rows := [][2]string{
		{"jobs", fmt.Sprintf("%d: %s", t.Jobs, strings.Join(byStatus, ", "))},
		{"wall time", roundDur(secondsDur(t.WallSeconds))},
		{"items built", strconv.FormatUint(t.Builds, 10)},
		{"cache hits", strconv.FormatUint(t.Hits, 10)},
		{"items evicted", fmt.Sprintf("%d: %d by the policy, %d for the budget, %d at the end", t.Evictions, t.StaleEvictions, t.BudgetEvictions, t.Evictions-min(t.Evictions, t.StaleEvictions+t.BudgetEvictions))},
		{"peak of the summed cache (what the host needed at once)", humanBytes(t.SummedPeakBytes)},
		{"sum of the workers' cache peaks", humanBytes(t.PeakBytes)},
		{"stale items held (MiB·s)", mibSeconds(t.StaleByteSeconds)},
		{"sum of the workers' peak RSS", rss(t.PeakRSS)},
		{"window publishes", strconv.FormatUint(t.Publishes, 10)},
	}
	if commandsMemory(r) {
		var top *jobRecord
		for _, j := range r.Jobs {
			if j.PeakRSS > 0 && (top == nil || j.PeakRSS > top.PeakRSS) {
				top = j
			}
		}
		if top != nil {
			rows = append(rows, [2]string{"largest peak RSS of a command", fmt.Sprintf("%s (%s)", humanBytes(top.PeakRSS), pageJobName(top))})
		}
		if t.CommandRSSFloor > 0 {
			rows = append(rows, [2]string{"poolrun's own peak RSS (counted in every command's)", humanBytes(t.CommandRSSFloor)})
		}
	}
	if b := t.BudgetExceeded; b.Jobs > 0 {
		rows = append(rows, [2]string{"jobs past the cache budget by their own items",
			fmt.Sprintf("%d (at most %s: job %d on worker %d)", b.Jobs, humanBytes(b.MaxBytes), b.JobID, b.Worker)})
	}
	p.f("<table class=\"totals\">\n")
	for _, row := range rows {
		p.f("<tr><td>%s</td><td>%s</td></tr>\n", esc(row[0]), esc(row[1]))
	}
	p.f("</table>\n")
}

// workersTable shows each worker's figures, as poolrun prints them.
func workersTable(p *page, r *report) {
	p.f("<table class=\"workers\">\n<tr><th>worker</th><th>host</th><th>pid</th><th>jobs</th><th>restarts</th><th>built</th><th>hits</th><th>evicted</th><th>by policy</th><th>for budget</th><th>peak cache</th><th>peak RSS</th><th>build time</th><th>samples</th></tr>\n")
	for _, w := range r.Workers {
		c := w.Cache
		p.f("<tr><td>%d</td><td>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td></tr>\n",
			w.Index, esc(w.Host), w.PID, w.Jobs, w.Restarts, c.Builds, c.Hits, c.Evictions, w.StaleEvictions, w.BudgetEvictions,
			esc(humanBytes(c.PeakBytes)), esc(rss(w.PeakRSS)), esc(roundDur(secondsDur(c.BuildTimeSeconds))), len(w.Samples))
	}
	p.f("</table>\n")
}

// maxListed bounds the rows of the table of jobs that did not succeed.
const maxListed = 200

// unsuccessful lists the jobs that did not succeed, with their errors.
func unsuccessful(p *page, r *report) {
	var jobs []*jobRecord
	for _, j := range r.Jobs {
		if j.Status != "succeeded" && j.Status != "skipped" {
			jobs = append(jobs, j)
		}
	}
	if len(jobs) == 0 {
		return
	}
	p.f("<h2>Jobs that did not succeed (%d)</h2>\n", len(jobs))
	p.f("<table class=\"unsuccessful\">\n<tr><th>job</th><th class=\"text\">function</th><th class=\"text\">labels</th><th class=\"text\">status</th><th>worker</th><th class=\"text\">error</th></tr>\n")
	for i, j := range jobs {
		if i == maxListed {
			p.f("<tr><td colspan=\"6\">and %d more: see the report</td></tr>\n", len(jobs)-maxListed)
			break
		}
		worker := "-"
		if j.Worker > 0 {
			worker = strconv.Itoa(j.Worker)
		}
		p.f("<tr><td>%s</td><td class=\"text\">%s</td><td class=\"text\">%s</td><td class=\"text\"><i class=\"sw %s\" style=\"background: var(--%s)\"></i> %s</td><td>%s</td><td class=\"text\">%s</td></tr>\n",
			esc(pageJobName(j)), esc(j.Func), esc(labelLine(j.Labels)), statusClass(j.Status), statusClass(j.Status), esc(j.Status), worker, esc(clip(j.Error, 2000)))
	}
	p.f("</table>\n")
}

// renderBenchPage writes the page of a bench report b, read from the file
// named src. A bench report holds each run's figures and its workers'
// cache peaks and peak RSS, not its jobs nor samples over time: the page
// says so, and has a chart of the modes' medians and a table of every run
// per worker count.
func renderBenchPage(w io.Writer, b *benchResult, src string) error {
	var p page
	title := "poolrun report: bench"
	p.head(title)
	p.f("<h1>%s</h1>\n", esc(title))
	runs := "1 run per mode"
	if b.Repeat > 1 {
		runs = fmt.Sprintf("%d runs per mode", b.Repeat)
	}
	check := "checksums agree: " + b.Checksum
	if !b.ChecksumsAgree {
		check = "checksums DIFFER: the modes wrote different outputs"
	}
	p.f("<p class=\"meta\">%s workload at scale %g: <b>%d</b> jobs, <b>%d</b> cache items · %s · %s · from %s</p>\n",
		esc(b.Config), b.Scale, b.Jobs, b.Items, esc(runs), esc(check), esc(src))
	p.f("<div class=\"note\"><b>No timelines here.</b> A bench report holds each run's figures and its workers' cache peaks and peak RSS, but not its jobs nor samples over time, so this page shows a chart of each mode's medians and a table of every run. To see a mode's timeline, run it alone with <code>--report</code> and make the page of that: <code>poolrun scaffold -j N FLAGS --report r.json; poolrun report r.json</code>, with the mode's FLAGS from this table.</div>\n")
	benchModesTable(&p, b)
	for _, set := range b.Results {
		p.f("<h2>%s</h2>\n", esc(benchWhere(set.Workers)))
		benchBars(&p, set)
		benchTable(&p, set, b)
	}
	p.foot(src)
	_, err := io.WriteString(w, p.String())
	return err
}

// benchModesTable lists the modes that ran with their poolrun scaffold
// flags.
func benchModesTable(p *page, b *benchResult) {
	p.f("<table class=\"modes\">\n<tr><th>mode</th><th class=\"text\">poolrun scaffold flags</th></tr>\n")
	seen := map[string]bool{}
	for _, set := range b.Results {
		for _, mf := range set.Modes {
			if seen[mf.Mode] {
				continue
			}
			seen[mf.Mode] = true
			flags := benchModeFlags(mf.Options)
			if mf.BudgetOfNever {
				flags += " --cache-budget SIZE (SIZE: the run's budget below, half of never's largest worker peak)"
			}
			p.f("<tr><td>%s</td><td class=\"text\"><code>%s</code></td></tr>\n", esc(mf.Mode), esc(flags))
		}
	}
	p.f("</table>\n")
}

// benchModeFlags are the poolrun scaffold flags of a mode's settings.
func benchModeFlags(o cacheSettings) string {
	var parts []string
	if o.Evict != "" && o.Evict != "stale" {
		parts = append(parts, "--evict "+o.Evict)
	}
	if !o.Affinity {
		parts = append(parts, "--no-affinity")
	}
	if !o.IdleEviction {
		parts = append(parts, "--no-idle-eviction")
	}
	if o.CacheBudget > 0 {
		parts = append(parts, "--cache-budget "+strconv.FormatInt(o.CacheBudget, 10))
	}
	if len(parts) == 0 {
		return "(none: the defaults)"
	}
	return strings.Join(parts, " ")
}

// benchBars draws, per mode, its median peak of the summed cache and its
// median wall time as bars, each on its own scale.
func benchBars(p *page, set *benchSet) {
	const rowH, labelW, barW, barX2 = 22.0, 110.0, 520.0, 700.0
	var topBytes, topWall float64
	for _, mf := range set.Modes {
		topBytes = max(topBytes, mf.Median.SummedPeakBytes)
		topWall = max(topWall, mf.Median.WallSeconds)
	}
	if topBytes <= 0 {
		topBytes = 1
	}
	if topWall <= 0 {
		topWall = 1
	}
	height := 24 + float64(len(set.Modes))*rowH
	p.f("<svg class=\"bars\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %s %s\" style=\"max-width: %spx\">\n", f1(svgWidth), f1(height), f1(svgWidth))
	p.f("<text x=\"%s\" y=\"14\" class=\"worker\">peak of the summed cache (median)</text><text x=\"%s\" y=\"14\" class=\"worker\">wall time (median)</text>\n", f1(labelW), f1(barX2))
	for i, mf := range set.Modes {
		y := 24 + float64(i)*rowH
		p.f("<text x=\"8\" y=\"%s\">%s</text>", f1(y+13), esc(mf.Mode))
		wb := mf.Median.SummedPeakBytes / topBytes * (barW - 90)
		ww := mf.Median.WallSeconds / topWall * (barW - 90)
		p.f("<rect class=\"bar1\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"14\"><title>%s</title></rect>", f1(labelW), f1(y+2), f1(max(wb, 1)),
			esc(fmt.Sprintf("%s: peak of the summed cache %s", mf.Mode, humanBytes(int64(mf.Median.SummedPeakBytes)))))
		p.f("<text x=\"%s\" y=\"%s\">%s</text>", f1(labelW+max(wb, 1)+6), f1(y+13), esc(humanBytes(int64(mf.Median.SummedPeakBytes))))
		p.f("<rect class=\"bar2\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"14\"><title>%s</title></rect>", f1(barX2), f1(y+2), f1(max(ww, 1)),
			esc(fmt.Sprintf("%s: wall time %s", mf.Mode, roundDur(secondsDur(mf.Median.WallSeconds)))))
		p.f("<text x=\"%s\" y=\"%s\">%s</text>\n", f1(barX2+max(ww, 1)+6), f1(y+13), esc(roundDur(secondsDur(mf.Median.WallSeconds))))
	}
	p.f("</svg>\n")
}

// benchTable has a row per run of each mode at one worker count, and the
// medians where there are several runs.
func benchTable(p *page, set *benchSet, b *benchResult) {
	budgets := slices.ContainsFunc(set.Modes, func(mf *benchModeFigs) bool {
		return slices.ContainsFunc(mf.Runs, func(r benchRun) bool { return r.CacheBudget > 0 })
	})
	p.f("<table class=\"runs\">\n<tr><th>mode</th><th>run</th><th>wall</th><th>builds</th><th>hits</th><th>evictions</th><th>sum of peaks</th><th>peak of sum</th><th>stale MiB·s</th><th>max RSS</th><th class=\"text\">per worker: peak cache / peak RSS</th>")
	if budgets {
		p.f("<th>budget</th>")
	}
	p.f("<th class=\"text\">checksum</th></tr>\n")
	row := func(class, mode, run string, f *benchFigures, r *benchRun) {
		var per []string
		for i := range f.WorkerPeakBytes {
			rs := 0.0
			if i < len(f.WorkerPeakRSS) {
				rs = f.WorkerPeakRSS[i]
			}
			per = append(per, fmt.Sprintf("%d: %s / %s", i+1, esc(humanBytes(int64(f.WorkerPeakBytes[i]))), esc(rss(int64(rs)))))
		}
		p.f("<tr class=\"%s\"><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class=\"text\">%s</td>",
			class, esc(mode), esc(run), esc(roundDur(secondsDur(f.WallSeconds))), esc(trimFloat(f.Builds)), esc(trimFloat(f.Hits)), esc(trimFloat(f.Evictions)),
			esc(humanBytes(int64(f.PeakBytes))), esc(humanBytes(int64(f.SummedPeakBytes))), esc(mibSeconds(f.StaleByteSeconds)), esc(rss(int64(f.MaxPeakRSS))),
			strings.Join(per, "<br/>"))
		budget, check := "", ""
		if r != nil {
			if r.CacheBudget > 0 {
				budget = humanBytes(r.CacheBudget)
				if r.BudgetExceeded > 0 {
					budget += fmt.Sprintf(" (exceeded by %d jobs)", r.BudgetExceeded)
				}
			}
			check = r.Checksum
			if b.ChecksumsAgree {
				check = "same"
			}
		}
		if budgets {
			p.f("<td>%s</td>", esc(budget))
		}
		p.f("<td class=\"text\">%s</td></tr>\n", esc(check))
	}
	for _, mf := range set.Modes {
		for i := range mf.Runs {
			r := &mf.Runs[i]
			row("", mf.Mode, strconv.Itoa(i+1), &r.benchFigures, r)
		}
		if b.Repeat > 1 && len(mf.Runs) > 1 {
			row("median", mf.Mode, "median", &mf.Median, nil)
		}
	}
	p.f("</table>\n")
}
