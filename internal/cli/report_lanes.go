package cli

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// What the page draws beyond the jobs' bars: the groups that colour them
// (a workflow's entries, or the jobs' functions), each worker's items as
// bars of their lifetimes, and a run's commands' memory.

// groupPalette colours the jobs' groups: Tableau 10 less its red, which
// marks failures, with four more; groups past its end take its colours
// again.
var groupPalette = []string{"#4E79A7", "#F28E2B", "#59A14F", "#76B7B2", "#EDC948", "#B07AA1",
	"#FF9DA7", "#9C755F", "#BAB0AC", "#1F4E79", "#8CD17D", "#D4A6C8", "#86BCB6", "#A0CBE8"}

// groupStyle is the CSS of the groups' colours, g0 to g13.
func groupStyle() string {
	var b strings.Builder
	for i, c := range groupPalette {
		fmt.Fprintf(&b, "svg .g%d { fill: %s; } .sw.g%d { background: %s; }\n", i, c, i, c)
	}
	return b.String()
}

// jobGroup is a set of jobs that the page colours alike: the jobs of one
// entry of a workflow (those of a foreach share their entry's line), or
// of one function.
type jobGroup struct {
	key   string
	name  string // as the legend shows it
	class string // g0, g1, ...
	jobs  int
}

// jobGroups groups the report's jobs, in the order of their first job,
// and returns the groups and each job's group by job id.
func jobGroups(r *report) ([]*jobGroup, map[int]*jobGroup) {
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
			g = &jobGroup{key: key, name: j.Func, class: fmt.Sprintf("g%d", len(groups)%len(groupPalette))}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.jobs++
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

// hashedName matches the cache name of a member of a family that ends in
// a hash of its parameter (as a workflow item's, poolrun.item:NAME@HASH):
// the page leaves the hash, and the workflow items' prefix, out.
var hashedName = regexp.MustCompile(`^(poolrun\.item:)?(.*)@[0-9a-f]{16}$`)

// itemName is how the page names an item: a workflow item by its name in
// the workflow, any other by its cache name less a hash at its end.
func itemName(name string) string {
	if m := hashedName.FindStringSubmatch(name); m != nil {
		return m[2]
	}
	return name
}

// Geometry of the items under a worker's lane.
const (
	itemRowH    = 12.0 // one row of item bars
	maxItemRows = 8    // rows before bars overlap in the last one
	itemGap     = 3.0  // between the jobs' lane and the items'
)

// itemReasons are the reasons an item went, as the page colours its bar;
// "held" is an item whose end the report does not give.
var itemReasons = []string{"policy", "budget", "end", "died", "held"}

// itemRows places a worker's items in rows where their lifetimes do not
// overlap, and returns each item's row and the number of rows.
func (tl *timeline) itemRows(items []*itemRecord) ([]int, int) {
	var rowEnd []float64
	rows := make([]int, len(items))
	for i, it := range items {
		start, end := tl.itemSpan(it)
		r := slices.IndexFunc(rowEnd, func(e float64) bool { return e <= start })
		if r < 0 {
			if len(rowEnd) < maxItemRows {
				rowEnd = append(rowEnd, 0)
				r = len(rowEnd) - 1
			} else {
				r = maxItemRows - 1
			}
		}
		rowEnd[r] = max(rowEnd[r], end)
		rows[i] = r
	}
	return rows, len(rowEnd)
}

// itemSpan is an item's lifetime in seconds since t0: from the start of
// its build to its eviction, or to the end of the picture.
func (tl *timeline) itemSpan(it *itemRecord) (start, end float64) {
	start, end = tl.sec(it.BuildStarted), tl.span
	if it.Evicted != nil {
		end = tl.sec(*it.Evicted)
	}
	return start, max(end, start)
}

// itemsHeight is the height of a worker's items under its lane: 0
// without items.
func (tl *timeline) itemsHeight(items []*itemRecord) float64 {
	if len(items) == 0 {
		return 0
	}
	_, n := tl.itemRows(items)
	return itemGap + float64(n)*itemRowH
}

// drawItems draws worker w's items at y: one bar per lifetime, the build
// darker, the time held coloured by why the item went, named and sized
// where it fits; hover for the details.
func (tl *timeline) drawItems(p *page, w workerReport, y float64) {
	if len(w.Items) == 0 {
		return
	}
	rows, n := tl.itemRows(w.Items)
	y += itemGap
	p.f("<text class=\"small\" x=\"%s\" y=\"%s\" text-anchor=\"end\">%s</text>\n", f1(gutter-6), f1(y+9), esc(fmt.Sprintf("%d item%s", len(w.Items), plural(len(w.Items)))))
	p.f("<rect class=\"itemlane\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\"/>\n", f1(gutter), f1(y), f1(plotW), f1(float64(n)*itemRowH))
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
		p.f("<g class=\"item\" data-item=\"%s\"><title>%s</title>", esc(name), esc(itemTitle(tl, it)))
		p.f("<rect class=\"item-held %s\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\"/>", reason, f1(x0), f1(by), f1(max(x1-x0, 2)), f1(h))
		p.f("<rect class=\"item-build\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\"/>", f1(x0), f1(by), f1(max(xb-x0, 1)), f1(h))
		if label := name + " · " + humanBytes(it.Bytes); x1-x0 >= float64(len(label))*5.2+8 {
			p.f("<text class=\"itemname\" x=\"%s\" y=\"%s\">%s</text>", f1(max(xb, x0)+3), f1(by+h/2+3.2), esc(label))
		}
		p.f("</g>\n")
	}
}

// itemTitle is the hover text of an item's bar.
func itemTitle(tl *timeline, it *itemRecord) string {
	lines := []string{"item " + itemName(it.Name) + ": " + humanBytes(it.Bytes)}
	if it.Name != itemName(it.Name) {
		lines = append(lines, it.Name)
	}
	lines = append(lines, fmt.Sprintf("build started %s, ended %s (%s)", secs(tl.sec(it.BuildStarted)), secs(tl.sec(it.Built)),
		roundDur(it.Built.Sub(it.BuildStarted))))
	if it.Evicted != nil {
		lines = append(lines, fmt.Sprintf("evicted %s (%s), held %s", secs(tl.sec(*it.Evicted)), evictedBy(it.EvictedBy), roundDur(it.Evicted.Sub(it.Built))))
	} else {
		lines = append(lines, "no eviction recorded")
	}
	return strings.Join(lines, "\n")
}

// evictedBy says why an item went.
func evictedBy(reason string) string {
	switch reason {
	case "policy":
		return "by the policy: no unfinished job needed it"
	case "budget":
		return "to stay within the cache budget"
	case "end":
		return "at the end of the pool"
	case "died":
		return "its worker died"
	}
	return reason
}

// commandsMemory reports whether the charts of r show its commands'
// memory rather than its workers': a run report of version 2, whose
// workers are poolrun itself.
func commandsMemory(r *report) bool {
	return r.Version >= 2 && strings.HasPrefix(r.Command, "run")
}

// memStep is a point of a step line: from t on, the value is v.
type memStep struct {
	t float64
	v int64
}

// commandSteps is, for worker w, the sum over time of the peak RSS of the
// commands running on it, counting those above the report's floor (see
// commandRecord.PeakRSS): a step line that rises at each command's start
// and falls at its end.
func (tl *timeline) commandSteps(bars []bar) []memStep {
	type change struct {
		t float64
		d int64
	}
	var cs []change
	floor := tl.r.Totals.CommandRSSFloor
	for _, b := range bars {
		if b.attempt > 0 && b.attempt < len(b.job.Attempts) {
			continue // its peak is the last run's
		}
		if rss := b.job.PeakRSS; rss > floor && !b.open {
			cs = append(cs, change{b.start, rss}, change{b.end, -rss})
		}
	}
	slices.SortStableFunc(cs, func(a, b change) int { return cmpFloat(a.t, b.t) })
	var steps []memStep
	var sum int64
	for _, c := range cs {
		sum += c.d
		if n := len(steps); n > 0 && steps[n-1].t == c.t {
			steps[n-1].v = sum
			continue
		}
		steps = append(steps, memStep{c.t, sum})
	}
	return steps
}

// maxStep is the largest value of steps.
func maxStep(steps []memStep) (top memStep) {
	for _, s := range steps {
		if s.v > top.v {
			top = s
		}
	}
	return top
}

// minFailedWidth is the least width of a failed job's bar, so that a
// failure of milliseconds in a run of hours still shows.
const minFailedWidth = 4.0

// groupClass is the CSS class of the colour of j's group.
func (tl *timeline) groupClass(j *jobRecord) string {
	if g := tl.groupOf[j.ID]; g != nil {
		return g.class
	}
	return "g0"
}

// rssLine draws worker w's resident memory over time from its samples ss:
// a dashed line, broken where it is unknown.
func rssLine(p *page, tl *timeline, w workerReport, ss []sample, yOf func(int64) float64) {
	var d strings.Builder
	var peakRSS sample
	pen := false // the path is drawing (the last RSS was known)
	for _, s := range ss {
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
		if s.RSS > peakRSS.RSS {
			peakRSS = s
		}
	}
	if d.Len() > 0 {
		p.f("<path class=\"rss\" d=\"%s\"><title>%s</title></path>\n", d.String(),
			esc(fmt.Sprintf("worker %d's resident memory: at most %s (at %s)", w.Index, humanBytes(peakRSS.RSS), secs(peakRSS.T))))
	}
}

// commandsLine draws the memory of the commands that ran on worker w (see
// commandSteps) as a step area on the chart whose bottom is cb.
func (tl *timeline) commandsLine(p *page, w workerReport, bars []bar, yOf func(int64) float64, cb float64) {
	steps := tl.commandSteps(bars)
	if len(steps) == 0 {
		return
	}
	var d strings.Builder
	fmt.Fprintf(&d, "M%s %s", f1(tl.x(steps[0].t)), f1(cb))
	for _, s := range steps {
		fmt.Fprintf(&d, "H%sV%s", f1(tl.x(s.t)), f1(yOf(s.v)))
	}
	d.WriteString("Z")
	top := maxStep(steps)
	p.f("<path class=\"cmdmem\" d=\"%s\"><title>%s</title></path>\n", d.String(),
		esc(fmt.Sprintf("worker %d's commands: at most %s of peak RSS at once (at %s), summed over the commands running", w.Index, humanBytes(top.v), secs(top.t))))
}

// commandLine says how a workflow job's command ended and the memory it
// took, where the report says (version 2).
func commandLine(j *jobRecord) []string {
	var parts []string
	switch {
	case j.ExitStatus == nil:
	case j.Signal != "":
		parts = append(parts, "killed by signal "+j.Signal)
	default:
		parts = append(parts, fmt.Sprintf("exit status %d", *j.ExitStatus))
	}
	if j.PeakRSS > 0 {
		parts = append(parts, "peak RSS "+humanBytes(j.PeakRSS))
	}
	if len(parts) == 0 {
		return nil
	}
	return []string{"command: " + strings.Join(parts, ", ")}
}
