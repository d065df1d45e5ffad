package cli

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/human"
	"github.com/poolrun/poolrun/internal/report"
)

// printTable prints the per-worker summary and the pool's cache figures;
// with workers that joined from elsewhere, each worker's host too.
func printTable(w io.Writer, st engine.Stats, wall time.Duration) {
	printWorkers(w, st, false)
	var parts []string
	for i, n := range st.Counts {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, engine.Status(i)))
		}
	}
	fmt.Fprintf(w, "jobs: %s; wall time %s; window published %d times\n", strings.Join(parts, ", "), human.Duration(wall), st.Publishes)
	printCache(w, st)
}

// printWorkers prints the table of the workers, a row each, and their
// total. inProcess says that the pool's own workers (those of no Host)
// are goroutines of this process: their rows give neither a pid nor a
// peak RSS, which would be poolrun's own, and the total RSS is the other
// workers'.
func printWorkers(w io.Writer, st engine.Stats, inProcess bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	hosts := slices.ContainsFunc(st.Workers, func(ws engine.WorkerStats) bool { return ws.Host != "" })
	host := func(s string) string {
		if hosts {
			return s + "\t"
		}
		return ""
	}
	fmt.Fprintln(tw, "worker\t"+host("host")+"pid\tjobs\tbuilt\thits\tevicted\tpeak cache\tpeak RSS\tbuild time\t")
	tot := st.Total()
	for _, ws := range st.Workers {
		c := ws.Cache
		pid, peak := fmt.Sprint(ws.PID), human.RSS(ws.PeakRSS)
		if inProcess && ws.Host == "" {
			pid, peak = "-", "-"
			tot.PeakRSS -= ws.PeakRSS
		}
		fmt.Fprintf(tw, "%d\t%s%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t\n", ws.Index, host(report.HostOf(ws)), pid, ws.Jobs, c.Builds, c.Hits, c.Evictions, human.Bytes(c.PeakBytes), peak, human.Duration(c.BuildTime))
	}
	if len(st.Workers) > 1 {
		c := tot.Cache
		fmt.Fprintf(tw, "total\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t\n", host(""), tot.Jobs, c.Builds, c.Hits, c.Evictions, human.Bytes(c.PeakBytes), human.RSS(tot.PeakRSS), human.Duration(c.BuildTime))
	}
	tw.Flush()
}

// printCache prints the line of the pool's cache figures.
func printCache(w io.Writer, st engine.Stats) {
	tot := st.Total()
	line := fmt.Sprintf("cache: the workers held at most %s at once (their peaks sum to %s); stale items held %s MiB·s",
		human.Bytes(st.PeakCacheBytes), human.Bytes(tot.Cache.PeakBytes), human.MiBSeconds(st.StaleByteSeconds))
	if tot.BudgetEvicted > 0 {
		line += fmt.Sprintf("; %d evicted to stay within the budget", tot.BudgetEvicted)
	}
	fmt.Fprintln(w, line)
}

// jobEnd is how a job of a workflow run ended, as the end of poolrun run
// says it.
type jobEnd struct {
	id     string // its workflow id
	status engine.Status
	// interrupted says that poolrun was interrupted under it: it is
	// Aborted because Run's context ended, not because its worker died.
	interrupted bool
	// msg says why it failed, was aborted or interrupted, as printFailures
	// prints it; line is its first line, which names the job by its bare
	// id, and reason what follows the job's place there ("exit status
	// 2"). All "" for a job that did not fail.
	msg, line, reason string
	seconds           float64 // how long its last run took; 0 if it never ran
	peakRSS           int64   // its command's (see commandRecord.PeakRSS)
}

// failed reports whether the job failed or its worker died under it.
func (e *jobEnd) failed() bool {
	return e.status == engine.Failed || e.status == engine.Aborted && !e.interrupted
}

// endLines is how many jobs a line of the end of a run names at most
// (then "and N more"); endFailed how many failed jobs get a line of
// their own; endSlowest how many of the slowest jobs it names, for a run
// of at least endSlowAfter.
const (
	endLines     = 10
	endFailed    = 10
	endSlowest   = 3
	endSlowAfter = time.Second
	// verdictNames is how many failed jobs the last line names.
	verdictNames = 3
)

// printRunEnd prints the end of a workflow run (ends, in the workflow's
// order), the most telling last: for a workflow with items, the cache's
// figures (and the table of the workers, when some joined from
// elsewhere: the pool's own are goroutines of poolrun); the slowest jobs;
// the command that used the most memory (above floor, poolrun's own peak
// RSS); the jobs cancelled, interrupted and failed, and why; and how many
// jobs ended each way, the verdict of a run that succeeded.
func printRunEnd(w io.Writer, ends []jobEnd, st engine.Stats, wall time.Duration, floor int64, items bool) {
	if items {
		if slices.ContainsFunc(st.Workers, func(ws engine.WorkerStats) bool { return ws.Host != "" }) {
			printWorkers(w, st, true)
		}
		c := st.Total().Cache
		fmt.Fprintf(w, "items: %d built, %d hits, %d evicted; build time %s; window published %d times\n", c.Builds, c.Hits, c.Evictions, human.Duration(c.BuildTime), st.Publishes)
		printCache(w, st)
	}
	if s := slowest(ends, wall); s != "" {
		fmt.Fprintf(w, "slowest: %s\n", s)
	}
	if i := largest(ends); i >= 0 && execflow.RSSAbove(ends[i].peakRSS, floor) {
		fmt.Fprintf(w, "peak RSS: %s %s, the most of any command\n", showID(ends[i].id), human.Bytes(ends[i].peakRSS))
	}
	var failed, interrupted, cancelled []string
	for _, e := range ends {
		switch {
		case e.failed():
			failed = append(failed, e.line)
		case e.interrupted:
			interrupted = append(interrupted, showID(e.id))
		case e.status == engine.Cancelled:
			cancelled = append(cancelled, showID(e.id))
		}
	}
	if len(cancelled) > 0 {
		fmt.Fprintf(w, "cancelled: %s\n", listSome(cancelled, endLines))
	}
	if len(interrupted) > 0 {
		fmt.Fprintf(w, "interrupted: %s\n", listSome(interrupted, endLines))
	}
	for i, l := range failed {
		if i == endFailed {
			fmt.Fprintf(w, "failed: ... and %d more (above)\n", len(failed)-i)
			break
		}
		fmt.Fprintf(w, "failed: %s\n", l)
	}
	fmt.Fprintf(w, "%d job%s: %s; wall time %s\n", len(ends), human.Plural(len(ends)), endCounts(ends), human.Duration(wall))
}

// endCounts says how many jobs ended each way: "8 succeeded, 2 skipped
// (up to date), 1 failed, 1 cancelled".
func endCounts(ends []jobEnd) string {
	kinds := []string{"succeeded", "skipped (up to date)", "failed", "aborted", "interrupted", "cancelled"}
	counts := make(map[string]int)
	for _, e := range ends {
		k := e.status.String()
		switch {
		case e.interrupted:
			k = "interrupted"
		case e.status == engine.Skipped:
			k = "skipped (up to date)"
		case !slices.Contains(kinds, k):
			kinds = append(kinds, k) // pending, queued, running: a pool that stopped first
		}
		counts[k]++
	}
	var parts []string
	for _, k := range kinds {
		if n := counts[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	if len(parts) == 0 {
		return "none ran"
	}
	return strings.Join(parts, ", ")
}

// slowest names the slowest jobs that ran to their end and how long each
// took, slowest first, for a run of at least endSlowAfter in which more
// than one did; "" otherwise.
func slowest(ends []jobEnd, wall time.Duration) string {
	var ran []jobEnd
	for _, e := range ends {
		if (e.status == engine.Succeeded || e.status == engine.Failed) && e.seconds > 0 {
			ran = append(ran, e)
		}
	}
	if wall < endSlowAfter || len(ran) < 2 {
		return ""
	}
	slices.SortStableFunc(ran, func(a, b jobEnd) int { return cmp.Compare(b.seconds, a.seconds) })
	var parts []string
	for _, e := range ran[:min(len(ran), endSlowest)] {
		parts = append(parts, showID(e.id)+" "+human.Duration(time.Duration(e.seconds*float64(time.Second))))
	}
	return strings.Join(parts, ", ")
}

// largest returns the index in ends of the job whose command had the
// largest peak RSS, -1 if none is known.
func largest(ends []jobEnd) int {
	i := -1
	for k, e := range ends {
		if e.peakRSS > 0 && (i < 0 || e.peakRSS > ends[i].peakRSS) {
			i = k
		}
	}
	return i
}

// listSome joins names with commas, the first n of them, then "and N
// more".
func listSome(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// showID is a job's id as the end of a run lists it: bare, or quoted if
// it holds a space, a comma, a quote or a character that does not print.
func showID(id string) string {
	if id == "" || strings.ContainsAny(id, " ,\"") || strings.ContainsFunc(id, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(id)
	}
	return id
}
