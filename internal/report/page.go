package report

import (
	"bytes"
	"cmp"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/poolrun/poolrun/internal/human"
)

// The page of a report is html/template over page.html and page.css: the
// Go code below computes what the page says (its texts, tables and the
// timeline's geometry, see geometry.go) into plain structs, and the
// template escapes every text as it places it.

var (
	//go:embed page.html
	pageHTML string
	//go:embed page.css
	pageCSS string

	// pageTemplate is parsed on first use, not at package initialisation:
	// every poolrun command links this package, and few write a page.
	pageTemplate = sync.OnceValue(func() *template.Template {
		return template.Must(template.New("page").Funcs(template.FuncMap{"plural": human.Plural}).Parse(pageHTML))
	})
)

// Render writes the page of report f, read from the file named src.
func Render(w io.Writer, f *File, src string) error {
	if f.Bench != nil {
		return renderBench(w, f.Bench, src)
	}
	return renderPool(w, f.Pool, src)
}

// execute writes the template name over data to w whole, or nothing.
func execute(w io.Writer, name string, data any) error {
	var buf bytes.Buffer
	if err := pageTemplate().ExecuteTemplate(&buf, name, data); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// frame is what every page has: its title, style and source.
type frame struct {
	Title string
	Style template.CSS // page.css, trusted: it is poolrun's own
	Src   string
}

// poolPage is the page of a pool's report.
type poolPage struct {
	frame
	Started                string
	Serial                 bool
	Workers, Jobs, Version int
	Wall, Options          string
	Legend                 legendView
	Timeline               *timelineView
	Totals                 []nameValue
	WorkerRows             []workerRow
	Entries                []entryStats
	Unsuccessful           *unsuccessfulView
	JobsTable              jobsTable
	Result                 string
}

type nameValue struct{ Name, Value string }

type legendView struct {
	By             string
	Groups         []legendGroup
	MoreGroups     int
	Statuses       []legendStatus
	Reasons        []legendStatus
	CommandsMemory bool
	Marks          bool // the ▲ and ▼ of a report without items
	Hint           string
}

type legendGroup struct {
	Class, Name string
	Jobs        int
}

type legendStatus struct {
	Class, Name, Mark string
	Count             int
}

type workerRow struct {
	Index, PID, Jobs, Restarts, Samples    int
	Host, PeakCache, PeakRSS, BuildTime    string
	Builds, Hits, Evictions, Stale, Budget uint64
}

type unsuccessfulView struct {
	Count, More int
	Rows        []unsuccessfulRow
}

type unsuccessfulRow struct {
	Name, Func, Labels, Class, Status, Worker, Error string
}

// maxLegendGroups bounds the groups the legend names; maxListed the rows
// of the table of jobs that did not succeed.
const (
	maxLegendGroups = 24
	maxListed       = 200
)

// renderPool writes the page of a pool's report r, read from the file
// named src: a heading, the legend, the timeline, the tables of the
// totals, the workers, the entries, the jobs that did not succeed and all
// jobs, and the command's result.
func renderPool(w io.Writer, r *Pool, src string) error {
	r = cleanPool(r)
	src = clean(src)
	tl := newTimeline(r)
	p := &poolPage{frame: frame{Title: "poolrun report: " + r.Command, Style: template.CSS(pageCSS), Src: src},
		Serial: r.Options.Workers == 0, Workers: r.Options.Workers, Jobs: r.Totals.Jobs, Version: r.Version,
		Wall: human.Duration(secondsDur(r.Totals.WallSeconds)), Options: poolOptions(r.Options)}
	if !tl.t0.IsZero() {
		p.Started = tl.t0.Local().Format("2006-01-02 15:04:05 MST")
	}
	p.Legend = legend(r, tl)
	p.Timeline = tl.view()
	p.Totals = totals(r)
	for _, w := range r.Workers {
		c := w.Cache
		p.WorkerRows = append(p.WorkerRows, workerRow{Index: w.Index, Host: w.Host, PID: w.PID, Jobs: w.Jobs, Restarts: w.Restarts,
			Builds: c.Builds, Hits: c.Hits, Evictions: c.Evictions, Stale: w.StaleEvictions, Budget: w.BudgetEvictions,
			PeakCache: human.Bytes(c.PeakBytes), PeakRSS: human.RSS(w.PeakRSS), BuildTime: human.Duration(secondsDur(c.BuildTimeSeconds)), Samples: len(w.Samples)})
	}
	p.Entries = entries(tl)
	p.Unsuccessful = unsuccessful(r)
	p.JobsTable = allJobs(tl)
	if r.Result != nil {
		if data, err := json.MarshalIndent(r.Result, "", "  "); err == nil {
			p.Result = string(data)
		}
	}
	return execute(w, "pool", p)
}

// legend is the legend above the timeline: the jobs' colours (by
// workflow entry or function), their statuses with their counts, the
// items' bars and the charts, and how to read them.
func legend(r *Pool, tl *timeline) legendView {
	l := legendView{By: "function", CommandsMemory: commandsMemory(r)}
	if slices.ContainsFunc(r.Jobs, func(j *Job) bool { return j.Line > 0 }) {
		l.By = "workflow entry"
	}
	for i, g := range tl.groups {
		if i == maxLegendGroups {
			l.MoreGroups = len(tl.groups) - i
			break
		}
		l.Groups = append(l.Groups, legendGroup{Class: g.class, Name: g.name, Jobs: len(g.jobs)})
	}
	counts := map[string]int{}
	for _, j := range r.Jobs {
		counts[statusClass(j.Status)]++
	}
	for _, st := range append(slices.Clone(pageStatuses), "other") {
		if st == "other" && counts[st] == 0 {
			continue
		}
		s := legendStatus{Class: st, Name: st, Count: counts[st]}
		switch st {
		case "failed":
			s.Mark = " (red outline and ✕)"
		case "aborted":
			s.Mark = " (dashed outline)"
		case "cancelled", "skipped", "other":
			s.Mark = " (pale)"
		}
		if st == "other" {
			s.Name = "unfinished"
		}
		l.Statuses = append(l.Statuses, s)
	}
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
	for _, reason := range itemReasons {
		if reasons[reason] > 0 {
			name := reason
			if reason == "held" {
				name = "not recorded"
			}
			l.Reasons = append(l.Reasons, legendStatus{Class: reason, Name: name, Count: reasons[reason]})
		}
	}
	hasItems := len(reasons) > 0
	l.Marks = !hasItems && r.Version < 2
	hint := "A bar runs from when the job began on its worker (from when it was sent, for a run that never began and in a report of an older poolrun) to when it ended; hover over it for the job's id, function, labels, times and error. A failed job's bar is at least a few pixels wide, whatever its duration. "
	if hasItems || r.Version >= 2 {
		hint += "Under each worker's jobs, a bar per item it built, from the start of its build to its eviction; hover for its size, times and why it went. "
	} else {
		hint += fmt.Sprintf("A worker reports its cache after each job, so a build or eviction shows at the first sample (every %s) after the job that made it. ", sampleEvery(r.SampleSeconds))
	}
	if hasItems {
		hint += "The chart under them: the worker's cache bytes, from its items' builds and evictions"
	} else {
		hint += "The chart under them: the worker's cache bytes as it reported them"
	}
	if l.CommandsMemory {
		floor := ""
		if f := r.Totals.CommandRSSFloor; f > 0 {
			floor = fmt.Sprintf(" Commands whose peak was at most poolrun's own (%s) count nothing: Linux counts poolrun's memory in each command's peak, so theirs is not known.", human.Bytes(f))
		}
		hint += ", and the memory of its commands: while a command runs, its peak RSS counts (wait4's ru_maxrss), summed over the commands running." + floor
	} else {
		hint += ", and its process's resident memory over time; the last sample is taken after the pool ended, with the caches cleared."
	}
	l.Hint = hint
	return l
}

// sampleEvery says how often samples were taken.
func sampleEvery(s float64) string {
	if s <= 0 {
		return "100 ms"
	}
	return human.Duration(secondsDur(s))
}

// poolOptions says how the pool held items.
func poolOptions(o Options) string {
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
		parts = append(parts, "budget "+human.Bytes(o.CacheBudget)+" per worker")
	}
	if o.Retries > 0 {
		parts = append(parts, fmt.Sprintf("%d retries", o.Retries))
	}
	if o.TimeoutSeconds > 0 {
		parts = append(parts, "timeout "+human.Duration(secondsDur(o.TimeoutSeconds)))
	}
	return strings.Join(parts, ", ")
}

// totals are the rows of the table of the pool's figures.
func totals(r *Pool) []nameValue {
	t := r.Totals
	var byStatus []string
	for _, st := range append(slices.Clone(pageStatuses), "pending", "queued", "running") {
		if n := t.ByStatus[st]; n > 0 {
			byStatus = append(byStatus, fmt.Sprintf("%d %s", n, st))
		}
	}
	rows := []nameValue{
		{"jobs", fmt.Sprintf("%d: %s", t.Jobs, strings.Join(byStatus, ", "))},
		{"wall time", human.Duration(secondsDur(t.WallSeconds))},
		{"items built", strconv.FormatUint(t.Builds, 10)},
		{"cache hits", strconv.FormatUint(t.Hits, 10)},
		{"items evicted", fmt.Sprintf("%d: %d by the policy, %d for the budget, %d at the end", t.Evictions, t.StaleEvictions, t.BudgetEvictions, t.Evictions-min(t.Evictions, t.StaleEvictions+t.BudgetEvictions))},
		{"peak of the summed cache (what the host needed at once)", human.Bytes(t.SummedPeakBytes)},
		{"sum of the workers' cache peaks", human.Bytes(t.PeakBytes)},
		{"stale items held (MiB·s)", human.MiBSeconds(t.StaleByteSeconds)},
		{"sum of the workers' peak RSS", human.RSS(t.PeakRSS)},
		{"window publishes", strconv.FormatUint(t.Publishes, 10)},
	}
	if commandsMemory(r) {
		var top *Job
		for _, j := range r.Jobs {
			if j.PeakRSS > 0 && (top == nil || j.PeakRSS > top.PeakRSS) {
				top = j
			}
		}
		if top != nil {
			rows = append(rows, nameValue{"largest peak RSS of a command", fmt.Sprintf("%s (%s)", human.Bytes(top.PeakRSS), jobName(top))})
		}
		if t.CommandRSSFloor > 0 {
			rows = append(rows, nameValue{"poolrun's own peak RSS (counted in every command's)", human.Bytes(t.CommandRSSFloor)})
		}
	}
	if b := t.BudgetExceeded; b.Jobs > 0 {
		rows = append(rows, nameValue{"jobs past the cache budget by their own items",
			fmt.Sprintf("%d (at most %s: job %d on worker %d)", b.Jobs, human.Bytes(b.MaxBytes), b.JobID, b.Worker)})
	}
	return rows
}

// unsuccessful lists the jobs that did not succeed, with their errors;
// nil if there are none.
func unsuccessful(r *Pool) *unsuccessfulView {
	var jobs []*Job
	for _, j := range r.Jobs {
		if j.Status != "succeeded" && j.Status != "skipped" {
			jobs = append(jobs, j)
		}
	}
	if len(jobs) == 0 {
		return nil
	}
	v := &unsuccessfulView{Count: len(jobs), More: max(len(jobs)-maxListed, 0)}
	for _, j := range jobs[:min(len(jobs), maxListed)] {
		worker := "-"
		if j.Worker > 0 {
			worker = strconv.Itoa(j.Worker)
		}
		v.Rows = append(v.Rows, unsuccessfulRow{Name: jobName(j), Func: j.Func, Labels: labelLine(j.Labels), Class: statusClass(j.Status),
			Status: j.Status, Worker: worker, Error: human.Clip(j.Error, 2000)})
	}
	return v
}

// entryStats are the figures of one group of jobs (a workflow's entry, or
// a function): how they ended and how long they ran.
type entryStats struct {
	Class, Name                             string
	Jobs, Succeeded, Failed, Skipped, Other int
	Runs                                    int
	Total, Mean, Max                        string
}

// entries are the figures of each group of jobs, in the legend's order.
// A job's time is its last run's (seconds); runs count every attempt.
func entries(tl *timeline) []entryStats {
	var out []entryStats
	for _, g := range tl.groups {
		e := entryStats{Class: g.class, Name: g.name, Jobs: len(g.jobs)}
		var total, longest float64
		var timed int
		for _, j := range g.jobs {
			switch j.Status {
			case "succeeded":
				e.Succeeded++
			case "failed":
				e.Failed++
			case "skipped":
				e.Skipped++
			default:
				e.Other++
			}
			switch {
			case len(j.Attempts) > 0:
				e.Runs += len(j.Attempts)
			case j.Begin() != nil:
				e.Runs++
			}
			if d, ok := duration(j); ok {
				total += d
				longest = max(longest, d)
				timed++
			}
		}
		e.Total, e.Mean, e.Max = "-", "-", "-"
		if timed > 0 {
			e.Total, e.Mean, e.Max = human.Duration(secondsDur(total)), human.Duration(secondsDur(total/float64(timed))), human.Duration(secondsDur(longest))
		}
		out = append(out, e)
	}
	return out
}

// jobsTable is the table of all jobs, in several orders: the page shows
// the one whose radio button is checked, by CSS alone.
type jobsTable struct {
	Rows  []jobRow
	Sorts []jobSort
	More  int // jobs past maxJobRows, not listed
}

type jobRow struct {
	ID                                                                 int
	Name, Entry, Class, Status, Exit, Worker, Start, Duration, PeakRSS string
	Attempts                                                           int
	start, seconds                                                     float64
	rss                                                                int64
}

type jobSort struct {
	Key, Name string
	Order     []int // indexes into Rows
}

// maxJobRows bounds the rows of each order of the table of all jobs: each
// order is a copy of the table.
const maxJobRows = 5000

// allJobs is the table of every job: number, id, entry, status, runs,
// exit status, worker, start, duration and peak RSS, by number, by start,
// longest first and largest first.
func allJobs(tl *timeline) jobsTable {
	var t jobsTable
	for _, j := range tl.r.Jobs {
		row := jobRow{ID: j.ID, Name: shortName(j), Class: statusClass(j.Status), Status: j.Status, Attempts: len(j.Attempts),
			Exit: "-", Worker: "-", Start: "-", Duration: "-", PeakRSS: human.RSS(j.PeakRSS), start: math.Inf(1), seconds: -1, rss: j.PeakRSS}
		if g := tl.groupOf[j.ID]; g != nil {
			row.Entry = g.name
		}
		if row.Attempts == 0 && j.Begin() != nil {
			row.Attempts = 1
		}
		switch {
		case j.Signal != "":
			row.Exit = j.Signal
		case j.ExitStatus != nil:
			row.Exit = strconv.Itoa(*j.ExitStatus)
		}
		if j.Worker > 0 {
			row.Worker = strconv.Itoa(j.Worker)
		}
		if b := j.Begin(); b != nil {
			row.start = tl.sec(*b)
			row.Start = secs(row.start)
		}
		if d, ok := duration(j); ok {
			row.seconds = d
			row.Duration = human.Duration(secondsDur(d))
		}
		t.Rows = append(t.Rows, row)
	}
	n := min(len(t.Rows), maxJobRows)
	t.More = len(t.Rows) - n
	order := func(key, name string, cmp func(a, b *jobRow) int) {
		idx := make([]int, len(t.Rows))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return cmp(&t.Rows[a], &t.Rows[b]) })
		t.Sorts = append(t.Sorts, jobSort{Key: key, Name: name, Order: idx[:n]})
	}
	order("id", "job", func(a, b *jobRow) int { return a.ID - b.ID })
	order("start", "start", func(a, b *jobRow) int { return cmp.Compare(a.start, b.start) })
	order("seconds", "duration (longest first)", func(a, b *jobRow) int { return cmp.Compare(b.seconds, a.seconds) })
	order("rss", "peak RSS (largest first)", func(a, b *jobRow) int { return cmp.Compare(b.rss, a.rss) })
	return t
}

// duration is how long j's last run took, from its times; false if it
// did not run or did not end.
func duration(j *Job) (float64, bool) {
	if j.Ended == nil || j.Begin() == nil {
		return 0, false
	}
	return j.Ended.Sub(*j.Begin()).Seconds(), true
}

// labelLine lists a job's labels as k=v, by key.
func labelLine(labels map[string]string) string {
	var parts []string
	for _, k := range sortedKeys(labels) {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ", ")
}

// secs shows s seconds since t0 to the millisecond.
func secs(s float64) string { return strconv.FormatFloat(s, 'f', 3, 64) + " s" }

// barTitle is the hover text of a job's bar.
func barTitle(b bar) string {
	j := b.job
	lines := []string{jobName(j) + ": " + j.Func}
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
		times = append(times, fmt.Sprintf("ended %s: %s", secs(b.end), human.Duration(secondsDur(b.end-b.start))))
	}
	lines = append(lines, strings.Join(times, ", "))
	if c := commandLine(b); c != "" {
		lines = append(lines, c)
	}
	if b.err != "" {
		lines = append(lines, "error: "+human.Clip(b.err, 600))
	}
	return strings.Join(lines, "\n")
}

// commandLine says how a run's command ended and, for the last run, the
// memory it took, where the report says (version 2); "" where it does not.
func commandLine(b bar) string {
	var parts []string
	switch {
	case b.signal != "":
		parts = append(parts, "killed by signal "+b.signal)
	case b.exit != nil:
		parts = append(parts, fmt.Sprintf("exit status %d", *b.exit))
	}
	if b.last() && b.job.PeakRSS > 0 {
		parts = append(parts, "peak RSS "+human.Bytes(b.job.PeakRSS))
	}
	if len(parts) == 0 {
		return ""
	}
	return "command: " + strings.Join(parts, ", ")
}

// notRunTitle is the hover text of a job that never ran.
func notRunTitle(tl *timeline, j *Job) string {
	lines := []string{jobName(j) + ": " + j.Func}
	if l := labelLine(j.Labels); l != "" {
		lines = append(lines, l)
	}
	lines = append(lines, j.Status+", never ran")
	if j.Ended != nil {
		lines = append(lines, "ended "+secs(tl.sec(*j.Ended)))
	}
	if j.Error != "" {
		lines = append(lines, "error: "+human.Clip(j.Error, 600))
	}
	return strings.Join(lines, "\n")
}

// itemTitle is the hover text of an item's bar.
func itemTitle(tl *timeline, it *Item) string {
	lines := []string{"item " + itemName(it.Name) + ": " + human.Bytes(it.Bytes)}
	if it.Name != itemName(it.Name) {
		lines = append(lines, it.Name)
	}
	lines = append(lines, fmt.Sprintf("build started %s, ended %s (%s)", secs(tl.sec(it.BuildStarted)), secs(tl.sec(it.Built)),
		human.Duration(it.Built.Sub(it.BuildStarted))))
	if it.Evicted != nil {
		lines = append(lines, fmt.Sprintf("evicted %s (%s), held %s", secs(tl.sec(*it.Evicted)), evictedBy(it.EvictedBy), human.Duration(it.Evicted.Sub(it.Built))))
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

func secondsDur(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
