package cli

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
)

// TestRunEndWorkerTable: with workers that joined from elsewhere, the end
// of a workflow run with items has the table of the workers, where the
// pool's own, goroutines of poolrun, give neither poolrun's pid nor its
// peak RSS, which the total leaves out; without them it has no table.
func TestRunEndWorkerTable(t *testing.T) {
	st := engine.Stats{Workers: []engine.WorkerStats{
		{Index: 1, PID: os.Getpid(), Jobs: 2, PeakRSS: 100 << 20, Cache: cachepool.Stats{Builds: 1}},
		{Index: 2, PID: 4242, Host: "far", Jobs: 3, PeakRSS: 30 << 20, Cache: cachepool.Stats{Builds: 1, Hits: 2}},
	}}
	ends := []jobEnd{{id: "a", status: engine.Succeeded}}
	var b strings.Builder
	printRunEnd(&b, ends, st, time.Millisecond, 0, true)
	got := b.String()
	pid := fmt.Sprint(os.Getpid())
	if strings.Contains(got, pid) || strings.Contains(got, "100.0 MiB") {
		t.Errorf("the table gives poolrun's own pid %s or peak RSS:\n%s", pid, got)
	}
	for _, want := range []string{"  worker  host   pid", "far  4242", "30.0 MiB", "items: 2 built, 2 hits"} {
		if !strings.Contains(got, want) {
			t.Errorf("the end lacks %q:\n%s", want, got)
		}
	}
	if total := lineWith(got, "total"); !strings.Contains(total, "30.0 MiB") {
		t.Errorf("total line %q, want the peak RSS of the worker from elsewhere alone", total)
	}

	st.Workers = st.Workers[:1]
	b.Reset()
	printRunEnd(&b, ends, st, time.Millisecond, 0, true)
	if got := b.String(); strings.Contains(got, "pid") {
		t.Errorf("with poolrun's own workers alone, a table:\n%s", got)
	}
}

// TestRunEndLists: each failed job has a line, the first endFailed of
// them; the interrupted and cancelled jobs are listed, the first
// endLines and how many more; an id that needs it is quoted; the counts
// add up; the slowest show only in a run of a second or more.
func TestRunEndLists(t *testing.T) {
	var ends []jobEnd
	for i := range 12 {
		id := fmt.Sprintf("f%d", i+1)
		ends = append(ends, jobEnd{id: id, status: engine.Failed, line: id + " (wf.yaml:2): exit status 1", seconds: float64(i)})
	}
	ends = append(ends, jobEnd{id: "has space", status: engine.Aborted, interrupted: true})
	for i := range 11 {
		ends = append(ends, jobEnd{id: fmt.Sprintf("c%d", i+1), status: engine.Cancelled})
	}
	var b strings.Builder
	printRunEnd(&b, ends, engine.Stats{}, 2*time.Second, 0, false)
	got := b.String()
	for _, want := range []string{
		"slowest: f12 11s, f11 10s, f10 9s\n",
		"cancelled: c1, c2, c3, c4, c5, c6, c7, c8, c9, c10 and 1 more\n",
		"interrupted: \"has space\"\n",
		"failed: f10 (wf.yaml:2): exit status 1\nfailed: ... and 2 more (above)\n",
		"24 jobs: 12 failed, 1 interrupted, 11 cancelled; wall time 2s\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the end lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "f11 (") {
		t.Errorf("the end has a line for the 11th failed job:\n%s", got)
	}
	b.Reset()
	printRunEnd(&b, ends, engine.Stats{}, time.Second-time.Millisecond, 0, false)
	if strings.Contains(b.String(), "slowest") {
		t.Errorf("a run of less than a second names its slowest jobs:\n%s", b.String())
	}
}

// lineWith returns the first line of s that contains sub.
func lineWith(s, sub string) string {
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
