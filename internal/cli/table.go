package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/poolrun/poolrun/engine"
)

// printTable prints the per-worker summary and the pool's cache figures;
// with workers that joined from elsewhere, each worker's host too.
func printTable(w io.Writer, st engine.Stats, wall time.Duration) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	hosts := slices.ContainsFunc(st.Workers, func(ws engine.WorkerStats) bool { return ws.Host != "" })
	host := func(s string) string {
		if hosts {
			return s + "\t"
		}
		return ""
	}
	fmt.Fprintln(tw, "worker\t"+host("host")+"pid\tjobs\tbuilt\thits\tevicted\tpeak cache\tpeak RSS\tbuild time\t")
	for _, ws := range st.Workers {
		c := ws.Cache
		fmt.Fprintf(tw, "%d\t%s%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t\n", ws.Index, host(workerHost(ws)), ws.PID, ws.Jobs, c.Builds, c.Hits, c.Evictions, humanBytes(c.PeakBytes), rss(ws.PeakRSS), roundDur(c.BuildTime))
	}
	if len(st.Workers) > 1 {
		tot := st.Total()
		c := tot.Cache
		fmt.Fprintf(tw, "total\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t\n", host(""), tot.Jobs, c.Builds, c.Hits, c.Evictions, humanBytes(c.PeakBytes), rss(tot.PeakRSS), roundDur(c.BuildTime))
	}
	tw.Flush()
	var parts []string
	for i, n := range st.Counts {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, engine.Status(i)))
		}
	}
	fmt.Fprintf(w, "jobs: %s; wall time %s; window published %d times\n", strings.Join(parts, ", "), roundDur(wall), st.Publishes)
	tot := st.Total()
	line := fmt.Sprintf("cache: the workers held at most %s at once (their peaks sum to %s); stale items held %s MiB·s",
		humanBytes(st.PeakCacheBytes), humanBytes(tot.Cache.PeakBytes), mibSeconds(st.StaleByteSeconds))
	if tot.BudgetEvicted > 0 {
		line += fmt.Sprintf("; %d evicted to stay within the budget", tot.BudgetEvicted)
	}
	fmt.Fprintln(w, line)
}
