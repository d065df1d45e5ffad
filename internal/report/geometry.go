package report

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/human"
)

// The timeline's geometry: where each bar, item, chart and label goes, in
// the SVG's own units (about pixels), computed into plain structs that
// page.html places.

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

	itemRowH    = 12.0 // one row of item bars
	maxItemRows = 8    // rows before bars overlap in the last one
	itemGap     = 3.0  // between the jobs' lane and the items'

	// minFailedWidth is the least width of a failed job's bar, so that a
	// failure of milliseconds in a run of hours still shows.
	minFailedWidth = 4.0
)

// groupColours is the number of colours of the jobs' groups, the classes
// g0 to g13 of page.css.
const groupColours = 14

// px is a coordinate, shown to a tenth of a unit.
type px float64

func (v px) String() string { return f1(float64(v)) }

// box is a rectangle.
type box struct{ X, Y, W, H px }

// label is a text at a point.
type label struct {
	X, Y px
	Text string
}

// path is an SVG path with its class and hover text.
type path struct{ Class, D, Title string }

// timelineView is the picture of a pool's report: a time axis, a block
// per worker, the lane of the jobs that never ran.
type timelineView struct {
	Width, Height                     px
	GridTop, GridBottom, BottomLabelY px
	Ticks                             []tick
	Blocks                            []blockView
	NotRun                            *notRunView
}

type tick struct {
	X      px
	Label  string
	Anchor string
}

// blockView is one worker's lane of job bars, its items and its chart.
type blockView struct {
	Index              int
	NameY, WhoY, JobsY px
	Who, Jobs          string
	Lane               box
	Bars               []barView
	Items              *itemsView
	Chart              chartView
}

type barView struct {
	box
	Class, Status, Title string
	Job                  int
	Mark                 *label // the ✕ above a failed run
	Label                *label // the job's name inside, where it fits
}

type itemsView struct {
	Count label
	Lane  box
	Items []itemView
}

type itemView struct {
	Name, Title, Reason string
	Held, Build         box
	Label               *label
}

type chartView struct {
	Box                 box
	Right, MidY, ScaleX px
	Bottom              px
	Top, Mid            label
	Empty               *label // why there is nothing to draw
	Paths               []path
}

type notRunView struct {
	LabelY px
	Count  string
	Lane   box
	Marks  []notRunMark
}

type notRunMark struct {
	box
	Class, Title string
	Job          int
}

// timeline is the time scale of a pool report's picture and the jobs'
// groups.
type timeline struct {
	r    *Pool
	t0   time.Time // time 0: when the pool started
	span float64   // the seconds shown
	// groups colour the jobs' bars (see jobGroups).
	groups  []*jobGroup
	groupOf map[int]*jobGroup
}

// newTimeline places t0 at the pool's start (for a report without one, the
// first job's queueing) and spans to the last thing that happened.
func newTimeline(r *Pool) *timeline {
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

// secOf is t in seconds since t0, NaN for nil or the zero time (a time
// the report does not give).
func (tl *timeline) secOf(t *time.Time) float64 {
	if t == nil || t.IsZero() {
		return math.NaN()
	}
	return tl.sec(*t)
}

// x is the abscissa of s seconds since t0.
func (tl *timeline) x(s float64) float64 {
	return gutter + min(max(s, 0), tl.span)/tl.span*plotW
}

// bar is one run of a job on a worker, drawn from when it began to when it
// ended.
type bar struct {
	job *Job
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
	exit          *int   // the run's command's exit status, where known
	signal        string // the signal that killed it
	open          bool   // no end recorded: the bar runs to the end of the picture
}

// last reports whether b is the job's last run (or its only one).
func (b bar) last() bool { return b.attempt == 0 || b.attempt == len(b.job.Attempts) }

// bars returns the runs of the report's jobs by worker, in order of start,
// and the jobs that never ran. Each run carries its own status, error,
// times and exit status: an attempt's from its record, the last run's
// exit status from the job's command.
func (tl *timeline) bars() (byWorker map[int][]bar, notRun []*Job) {
	byWorker = map[int][]bar{}
	for _, j := range tl.r.Jobs {
		switch {
		case len(j.Attempts) > 0:
			for i, a := range j.Attempts {
				b := bar{job: j, start: tl.sec(a.Begin()), end: tl.sec(a.Ended), sent: tl.secOf(&a.Sent), started: tl.secOf(a.Started),
					status: a.Status, attempt: i + 1, err: a.Error, exit: a.ExitCode, signal: a.Signal}
				if b.last() && b.exit == nil {
					b.exit, b.signal = j.ExitStatus, j.Signal
				}
				byWorker[a.Worker] = append(byWorker[a.Worker], b)
			}
		case j.Begin() != nil:
			b := bar{job: j, start: tl.sec(*j.Begin()), end: tl.span, sent: tl.secOf(j.Sent), started: tl.secOf(j.Started),
				status: j.Status, err: j.Error, open: j.Ended == nil, exit: j.ExitStatus, signal: j.Signal}
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
				return cmp.Compare(a.start, b.start)
			}
			return a.job.ID - b.job.ID
		})
	}
	return byWorker, notRun
}

// workers are the report's workers by index, and a bare entry for each
// that ran jobs but has none (a report cut short).
func (tl *timeline) workers(byWorker map[int][]bar) []Worker {
	workers := slices.Clone(tl.r.Workers)
	for idx := range byWorker {
		if !slices.ContainsFunc(workers, func(w Worker) bool { return w.Index == idx }) {
			workers = append(workers, Worker{Index: idx})
		}
	}
	slices.SortFunc(workers, func(a, b Worker) int { return a.Index - b.Index })
	return workers
}

// view computes the timeline: a time axis, then per worker its lane of
// job bars, its items and its chart of cache bytes and memory over time,
// then the lane of the jobs that never ran.
func (tl *timeline) view() *timelineView {
	byWorker, notRun := tl.bars()
	workers := tl.workers(byWorker)

	var top int64 // the charts' common scale
	cmdMem := commandsMemory(tl.r)
	for _, w := range workers {
		top = max(top, maxStep(tl.cacheSteps(w)).v)
		for _, s := range w.Samples {
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
	bottom := height - 22
	v := &timelineView{Width: svgWidth, Height: px(height), GridTop: axisH - 6, GridBottom: px(bottom), BottomLabelY: px(bottom + 14)}

	step := niceTimeStep(tl.span / 10)
	if !(step > 0) || tl.span/step > 100 { // a span too small for floats
		step = tl.span
	}
	for i := 0; float64(i)*step <= tl.span*(1+1e-9); i++ {
		t := float64(i) * step
		anchor := "middle"
		if t == 0 {
			anchor = "start"
		}
		v.Ticks = append(v.Ticks, tick{X: px(tl.x(t)), Label: tickLabel(t, step), Anchor: anchor})
	}

	y := axisH
	for _, w := range workers {
		v.Blocks = append(v.Blocks, tl.block(w, byWorker[w.Index], y, top))
		y += laneH + tl.itemsHeight(w.Items) + chartGap + chartH + blockGap
	}
	if len(notRun) > 0 {
		nr := &notRunView{LabelY: px(y + 12), Count: fmt.Sprintf("%d job%s", len(notRun), human.Plural(len(notRun))),
			Lane: box{gutter, px(y), plotW, notRunH}}
		for _, j := range notRun {
			t := tl.span
			if j.Ended != nil {
				t = tl.sec(*j.Ended)
			}
			x := min(tl.x(t), gutter+plotW-3)
			nr.Marks = append(nr.Marks, notRunMark{box: box{px(x), px(y + 2), 3, notRunH - 4}, Class: statusClass(j.Status),
				Title: notRunTitle(tl, j), Job: j.ID})
		}
		v.NotRun = nr
	}
	return v
}

// block computes one worker's lane of job bars at y, its items and its
// chart under them on a scale of top bytes.
func (tl *timeline) block(w Worker, bars []bar, y float64, top int64) blockView {
	bv := blockView{Index: w.Index, NameY: px(y + 13), WhoY: px(y + 25), JobsY: px(y + 37), Lane: box{gutter, px(y), plotW, laneH}}
	switch {
	case tl.r.Options.Workers == 0:
		bv.Who = "serial: poolrun itself"
	case w.PID > 0 && w.Host != "":
		bv.Who = fmt.Sprintf("pid %d on %s", w.PID, w.Host)
	case w.PID > 0:
		bv.Who = fmt.Sprintf("pid %d", w.PID)
	}
	bv.Jobs = fmt.Sprintf("%d job%s", w.Jobs, human.Plural(w.Jobs))
	if w.Restarts > 0 {
		bv.Jobs += fmt.Sprintf(", %d restart%s", w.Restarts, human.Plural(w.Restarts))
	}

	// Runs that overlap go to sub-rows: those drawn from when they were
	// sent (a report of an older poolrun, a run that never began) while
	// the one before still ran.
	rows, n := placeRows(len(bars), maxRows, func(i int) (float64, float64) { return bars[i].start, bars[i].end })
	rowH := (laneH - 2) / float64(max(n, 1))
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
			width = max(width, minFailedWidth) // a failure of milliseconds still shows
		}
		by := y + 1 + float64(rows[i])*rowH
		// The group's colour comes after the status's in the style, and
		// wins: the status shows as an outline or a paler bar.
		class := "job " + statusClass(b.status) + " " + tl.groupClass(b.job)
		if i%2 == 1 {
			class += " alt"
		}
		v := barView{box: box{px(x0), px(by), px(width), px(rowH)}, Class: class, Status: b.status, Title: barTitle(b), Job: b.job.ID}
		if failed {
			v.Mark = &label{X: px(x0 + width/2), Y: px(y - 1.5)}
		}
		if name := shortName(b.job); rowH >= 12 && width >= float64(len(name))*6+8 {
			v.Label = &label{X: px(x0 + 4), Y: px(by + rowH/2 + 3.5), Text: name}
		}
		bv.Bars = append(bv.Bars, v)
	}
	bv.Items = tl.items(w, y+laneH)

	// The chart: cache bytes (area); RSS (dashed line, broken where
	// unknown), or for a run report of version 2 the commands' memory
	// (area); in a report without items, builds (▲ at the bottom) and
	// evictions (▼ at the top).
	cy := y + laneH + tl.itemsHeight(w.Items) + chartGap
	cb := cy + chartH // the chart's bottom
	yOf := func(v int64) float64 { return cb - float64(v)/float64(top)*(chartH-2) }
	c := chartView{Box: box{gutter, px(cy), plotW, chartH}, Right: gutter + plotW, MidY: px(yOf(top / 2)), ScaleX: gutter - 6, Bottom: px(cb),
		Top: label{Y: px(cy + 9), Text: human.Bytes(top)}, Mid: label{Y: px(yOf(top/2) + 4), Text: human.Bytes(top / 2)}}
	cache := tl.cacheSteps(w)
	if len(cache) == 0 && len(w.Samples) == 0 {
		why := "no samples of cache and memory in this report"
		if tl.r.Version == 0 {
			why += " (version 0: written before poolrun sampled them)"
		}
		c.Empty = &label{X: gutter + 10, Y: px(cy + chartH/2 + 4), Text: why}
		bv.Chart = c
		return bv
	}
	if len(cache) > 0 {
		peak := maxStep(cache)
		c.Paths = append(c.Paths, path{Class: "cache", D: tl.stepArea(cache, yOf, cb),
			Title: fmt.Sprintf("worker %d's cache: at most %s (at %s)", w.Index, human.Bytes(peak.v), secs(peak.t))})
	}
	if commandsMemory(tl.r) {
		if steps := tl.commandSteps(bars); len(steps) > 0 {
			top := maxStep(steps)
			c.Paths = append(c.Paths, path{Class: "cmdmem", D: tl.stepArea(steps, yOf, cb),
				Title: fmt.Sprintf("worker %d's commands: at most %s of peak RSS at once (at %s), summed over the commands running", w.Index, human.Bytes(top.v), secs(top.t))})
		}
	} else if p, ok := tl.rssLine(w, yOf); ok {
		c.Paths = append(c.Paths, p)
	}
	if len(w.Items) == 0 && tl.r.Version < 2 {
		// Without items' bars, marks say when builds and evictions were
		// counted.
		for _, s := range w.Samples {
			x := tl.x(s.T)
			if s.Builds > 0 {
				c.Paths = append(c.Paths, path{Class: "build", D: fmt.Sprintf("M%s %sl4.5 -8l4.5 8Z", f1(x-4.5), f1(cb)),
					Title: fmt.Sprintf("%d item%s built (counted at %s; cache %s)", s.Builds, human.Plural(int(s.Builds)), secs(s.T), human.Bytes(s.CacheBytes))})
			}
			if s.Evictions > 0 {
				c.Paths = append(c.Paths, path{Class: "evict", D: fmt.Sprintf("M%s %sl4.5 8l4.5 -8Z", f1(x-4.5), f1(cy)),
					Title: fmt.Sprintf("%d item%s evicted (counted at %s; cache %s)", s.Evictions, human.Plural(int(s.Evictions)), secs(s.T), human.Bytes(s.CacheBytes))})
			}
		}
	}
	bv.Chart = c
	return bv
}

// placeRows places n spans (span(i): start and end) in rows where they
// do not overlap, at most limit rows (the last takes the rest; no limit
// if limit is 0), and returns each span's row and the number of rows.
func placeRows(n, limit int, span func(i int) (start, end float64)) ([]int, int) {
	var rowEnd []float64
	rows := make([]int, n)
	for i := range n {
		start, end := span(i)
		r := slices.IndexFunc(rowEnd, func(e float64) bool { return e <= start })
		if r < 0 {
			if limit == 0 || len(rowEnd) < limit {
				rowEnd = append(rowEnd, 0)
				r = len(rowEnd) - 1
			} else {
				r = limit - 1
			}
		}
		rowEnd[r] = max(rowEnd[r], end)
		rows[i] = r
	}
	return rows, len(rowEnd)
}

// step is a point of a step line: from t on, the value is v.
type step struct {
	t float64
	v int64
}

// stepArea is the path of steps as an area down to cb.
func (tl *timeline) stepArea(steps []step, yOf func(int64) float64, cb float64) string {
	var d strings.Builder
	fmt.Fprintf(&d, "M%s %s", f1(tl.x(steps[0].t)), f1(cb))
	for _, s := range steps {
		fmt.Fprintf(&d, "H%sV%s", f1(tl.x(s.t)), f1(yOf(s.v)))
	}
	d.WriteString("V" + f1(cb) + "Z")
	return d.String()
}

// sumSteps is the running sum of changes (at t, by d) as a step line.
func sumSteps(cs []step) []step {
	slices.SortStableFunc(cs, func(a, b step) int { return cmp.Compare(a.t, b.t) })
	var steps []step
	var sum int64
	for _, c := range cs {
		sum += c.v
		if n := len(steps); n > 0 && steps[n-1].t == c.t {
			steps[n-1].v = sum
			continue
		}
		steps = append(steps, step{c.t, sum})
	}
	return steps
}

// cacheSteps is worker w's cache bytes over time. Where the worker has
// items (version 2), it is drawn from their lifetimes: up by an item's
// size when its build ended, down when it was evicted, in step with the
// items' bars. Else it is the samples' cache bytes, as the worker last
// reported them at each sample.
func (tl *timeline) cacheSteps(w Worker) []step {
	if len(w.Items) == 0 {
		steps := make([]step, 0, len(w.Samples))
		for _, s := range w.Samples {
			steps = append(steps, step{s.T, s.CacheBytes})
		}
		return steps
	}
	cs := []step{{0, 0}}
	for _, it := range w.Items {
		start, end := tl.itemSpan(it)
		built := min(max(tl.sec(it.Built), start), end)
		cs = append(cs, step{built, it.Bytes})
		if it.Evicted != nil {
			cs = append(cs, step{end, -it.Bytes})
		}
	}
	return sumSteps(cs)
}

// commandSteps is, for a worker's runs, the sum over time of the peak RSS
// of the commands running on it, counting those above the report's floor
// (see Command.PeakRSS): a step line that rises at each command's start
// and falls at its end.
func (tl *timeline) commandSteps(bars []bar) []step {
	var cs []step
	floor := tl.r.Totals.CommandRSSFloor
	for _, b := range bars {
		if !b.last() {
			continue // its peak is the last run's
		}
		if rss := b.job.PeakRSS; rss > floor && !b.open {
			cs = append(cs, step{b.start, rss}, step{b.end, -rss})
		}
	}
	return sumSteps(cs)
}

// maxStep is the largest value of steps.
func maxStep(steps []step) (top step) {
	for _, s := range steps {
		if s.v > top.v {
			top = s
		}
	}
	return top
}

// rssLine is worker w's resident memory over time from its samples: a
// dashed line, broken where it is unknown; false if it is never known.
func (tl *timeline) rssLine(w Worker, yOf func(int64) float64) (path, bool) {
	var d strings.Builder
	var peak Sample
	pen := false // the path is drawing (the last RSS was known)
	for _, s := range w.Samples {
		if s.RSS <= 0 {
			pen = false
			continue
		}
		cmd := "L"
		if !pen {
			cmd = "M"
		}
		fmt.Fprintf(&d, "%s%s %s", cmd, f1(tl.x(s.T)), f1(yOf(s.RSS)))
		pen = true
		if s.RSS > peak.RSS {
			peak = s
		}
	}
	return path{Class: "rss", D: d.String(),
		Title: fmt.Sprintf("worker %d's resident memory: at most %s (at %s)", w.Index, human.Bytes(peak.RSS), secs(peak.T))}, d.Len() > 0
}

// itemReasons are the reasons an item went, as the page colours its bar;
// "held" is an item whose end the report does not give.
var itemReasons = []string{"policy", "budget", "end", "died", "held"}

// itemSpan is an item's lifetime in seconds since t0: from the start of
// its build to its eviction, or to the end of the picture.
func (tl *timeline) itemSpan(it *Item) (start, end float64) {
	start, end = tl.sec(it.BuildStarted), tl.span
	if it.Evicted != nil {
		end = tl.sec(*it.Evicted)
	}
	return start, max(end, start)
}

// itemRows places a worker's items in rows where their lifetimes do not
// overlap.
func (tl *timeline) itemRows(items []*Item) ([]int, int) {
	return placeRows(len(items), maxItemRows, func(i int) (float64, float64) { return tl.itemSpan(items[i]) })
}

// itemsHeight is the height of a worker's items under its lane: 0
// without items.
func (tl *timeline) itemsHeight(items []*Item) float64 {
	if len(items) == 0 {
		return 0
	}
	_, n := tl.itemRows(items)
	return itemGap + float64(n)*itemRowH
}

// items computes worker w's items at y: one bar per lifetime, the build
// darker, the time held coloured by why the item went, named and sized
// where it fits; nil without items.
func (tl *timeline) items(w Worker, y float64) *itemsView {
	if len(w.Items) == 0 {
		return nil
	}
	rows, n := tl.itemRows(w.Items)
	y += itemGap
	v := &itemsView{Count: label{X: gutter - 6, Y: px(y + 9), Text: fmt.Sprintf("%d item%s", len(w.Items), human.Plural(len(w.Items)))},
		Lane: box{gutter, px(y), plotW, px(float64(n) * itemRowH)}}
	for i, it := range w.Items {
		start, end := tl.itemSpan(it)
		x0, x1 := tl.x(start), tl.x(end)
		xb := tl.x(tl.sec(it.Built))
		by := y + float64(rows[i])*itemRowH + 1
		h := itemRowH - 2
		reason := it.EvictedBy
		if !slices.Contains(itemReasons, reason) {
			reason = "held"
		}
		name := itemName(it.Name)
		iv := itemView{Name: name, Title: itemTitle(tl, it), Reason: reason,
			Held: box{px(x0), px(by), px(max(x1-x0, 2)), px(h)}, Build: box{px(x0), px(by), px(max(xb-x0, 1)), px(h)}}
		if text := name + " · " + human.Bytes(it.Bytes); x1-x0 >= float64(len(text))*5.2+8 {
			iv.Label = &label{X: px(max(xb, x0) + 3), Y: px(by + h/2 + 3.2), Text: text}
		}
		v.Items = append(v.Items, iv)
	}
	return v
}

// jobGroup is a set of jobs that the page colours alike: the jobs of one
// entry of a workflow (those of a foreach share their entry's line), or
// of one function.
type jobGroup struct {
	key   string
	name  string // as the legend shows it
	class string // g0, g1, ...
	jobs  []*Job
}

// jobGroups groups the report's jobs, in the order of their first job,
// and returns the groups and each job's group by job id.
func jobGroups(r *Pool) ([]*jobGroup, map[int]*jobGroup) {
	var groups []*jobGroup
	byKey := map[string]*jobGroup{}
	byJob := map[int]*jobGroup{}
	ids := map[string][]string{} // the workflow ids of an entry's jobs
	for _, j := range r.Jobs {
		key := "func " + j.Func
		if j.Line > 0 {
			key = "line " + strconv.Itoa(j.Line)
			ids[key] = append(ids[key], j.JobID)
		}
		g := byKey[key]
		if g == nil {
			g = &jobGroup{key: key, name: j.Func, class: fmt.Sprintf("g%d", len(groups)%groupColours)}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.jobs = append(g.jobs, j)
		byJob[j.ID] = g
	}
	for key, list := range ids {
		g := byKey[key]
		g.name = entryName(list) + " (" + key + ")"
	}
	return groups, byJob
}

// entryName names the jobs of one workflow entry by their ids: the id of
// a single job, else the ids' common prefix and a *.
func entryName(ids []string) string {
	if len(ids) == 1 {
		return ids[0]
	}
	prefix := ids[0]
	for _, id := range ids[1:] {
		n := 0
		for n < len(prefix) && n < len(id) && prefix[n] == id[n] {
			n++
		}
		prefix = prefix[:n]
	}
	return prefix + "*"
}

// groupClass is the CSS class of the colour of j's group.
func (tl *timeline) groupClass(j *Job) string {
	if g := tl.groupOf[j.ID]; g != nil {
		return g.class
	}
	return "g0"
}

// hashedName matches the cache name of a member of a family that ends in
// a hash of its parameter (as a workflow item's, poolrun.item:NAME@HASH,
// or a worker program's, poolrun.worker:NAME@HASH): the page leaves the
// hash, and the workflow's prefixes, out.
var hashedName = regexp.MustCompile(`^(poolrun\.item:|poolrun\.worker:)?(.*)@[0-9a-f]{16}$`)

// itemName is how the page names an item: a workflow item by its name in
// the workflow, a worker program as "worker NAME", any other by its
// cache name less a hash at its end.
func itemName(name string) string {
	if m := hashedName.FindStringSubmatch(name); m != nil {
		if m[1] == "poolrun.worker:" {
			return "worker " + m[2]
		}
		return m[2]
	}
	return name
}

// commandsMemory reports whether the charts of r show its commands'
// memory rather than its workers': a run report of version 2, whose
// workers are poolrun itself.
func commandsMemory(r *Pool) bool {
	return r.Version >= 2 && strings.HasPrefix(r.Command, "run")
}

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

// jobName is how the page names a job in a line: its number, and its
// workflow id where it has one.
func jobName(j *Job) string {
	if id, ok := j.Labels[execflow.LabelID]; ok {
		return fmt.Sprintf("job %d %q", j.ID, id)
	}
	return fmt.Sprintf("job %d", j.ID)
}

// shortName is what fits inside a job's bar: its workflow id, or its
// function's short name and its labels' values.
func shortName(j *Job) string {
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
