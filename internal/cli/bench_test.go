package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/internal/human"
	"github.com/poolrun/poolrun/internal/report"
)

// benchArgs run poolrun bench on a tiny scaffold (2 chunks), quietly.
var benchArgs = []string{"bench", "--config", "testdata/bench.yaml", "--scale", "0.01", "--quiet"}

// allModes are the modes of poolrun bench in table order.
var allModes = []string{"plain", "per-worker", "affinity", "idle", "all", "never", "each-job", "budget"}

// TestBenchTable runs every mode at the default worker counts, 2 and 4, and
// checks the table (a row per worker count and mode, in order, with one
// checksum, and the notes under it) and the --report JSON of the same runs.
func TestBenchTable(t *testing.T) {
	dir := t.TempDir()
	reportPath := filepath.Join(dir, "report.json")
	var stdout, stderr bytes.Buffer
	args := slices.Concat(benchArgs, []string{"--out", dir, "--report", reportPath})
	if err := Main(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("poolrun bench: %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	t.Logf("poolrun %s:\n%s", strings.Join(args, " "), out)
	if stderr.Len() > 0 {
		t.Errorf("--quiet, yet standard error has:\n%s", stderr.String())
	}
	data, err := os.ReadFile(reportPath)
	if err != nil {
		t.Fatal(err)
	}
	var res report.Bench
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatalf("--report: %v\n%s", err, data)
	}
	if !slices.Equal(res.Workers, []int{2, 4}) || !slices.Equal(res.Modes, allModes) || res.Repeat != 1 {
		t.Fatalf("workers %v, modes %v, repeat %d; want [2 4], %v, 1", res.Workers, res.Modes, res.Repeat, allModes)
	}
	checkBench(t, &res, dir)

	lines := strings.Split(strings.TrimSpace(out), "\n")
	rows := 2 * len(allModes)
	if len(lines) != 1+rows+3 {
		t.Fatalf("%d lines, want a header, %d rows and 3 notes", len(lines), rows)
	}
	wantHeader := []string{"workers", "mode", "wall", "builds", "sum of peaks", "peak of sum", "stale MiB·s", "max RSS", "checksum"}
	if h := strings.Join(strings.Fields(lines[0]), " "); h != strings.Join(wantHeader, " ") {
		t.Errorf("header %q, want the columns %q", lines[0], wantHeader)
	}
	for i, line := range lines[1 : 1+rows] {
		f := strings.Fields(line)
		set, mf := res.Results[i/len(allModes)], res.Results[i/len(allModes)].Modes[i%len(allModes)]
		workers := strconv.Itoa(set.Workers)
		if len(f) < 4 || f[0] != workers || f[1] != mf.Mode {
			t.Errorf("row %d is %q, want %s workers, mode %s", i+1, line, workers, mf.Mode)
			continue
		}
		if builds := human.Count(mf.Median.Builds); f[3] != builds || f[len(f)-1] != res.Checksum {
			t.Errorf("%s workers, %s: %s builds, checksum %s; the report says %s, %s", workers, mf.Mode, f[3], f[len(f)-1], builds, res.Checksum)
		}
	}
	notes := lines[1+rows:]
	if !strings.HasPrefix(notes[0], "testdata/bench.yaml workload at scale 0.01: ") || !strings.HasSuffix(notes[0], "; 1 run per mode") {
		t.Errorf("first note %q", notes[0])
	}
	if !strings.HasPrefix(notes[1], "budget (half of never's largest worker peak): ") ||
		!strings.Contains(notes[1], "per worker at 2 workers") || !strings.Contains(notes[1], "per worker at 4 workers") {
		t.Errorf("budget note %q", notes[1])
	}
	if want := "checksums agree: " + res.Checksum + " "; !strings.HasPrefix(notes[2], want) {
		t.Errorf("last line %q, want it to start with %q", notes[2], want)
	}
}

// TestBenchRepeat runs some modes twice at 2 workers with --json: the
// modes take turns, each has both runs and their medians, and each round's
// budget comes from that round's never.
func TestBenchRepeat(t *testing.T) {
	dir := t.TempDir()
	reportPath := filepath.Join(dir, "report.json")
	var stdout, stderr bytes.Buffer
	modes := []string{"plain", "never", "each-job", "budget"}
	args := slices.Concat(benchArgs, []string{"--workers", "2", "--modes", "budget,never,each-job,plain", "--json", "--repeat", "2", "--out", dir, "--report", reportPath})
	if err := Main(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("poolrun bench: %v\n%s", err, stderr.String())
	}
	var res report.Bench
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout.String())
	}
	if saved, err := os.ReadFile(reportPath); err != nil || !bytes.Equal(saved, stdout.Bytes()) {
		t.Errorf("--report file differs from the --json output (%v)", err)
	}
	if !slices.Equal(res.Workers, []int{2}) || !slices.Equal(res.Modes, modes) || res.Repeat != 2 {
		t.Fatalf("workers %v, modes %v, repeat %d; want [2], %v, 2", res.Workers, res.Modes, res.Repeat, modes)
	}
	checkBench(t, &res, dir)
}

// checkBench checks the figures of a poolrun bench that must hold on any
// machine: counts and how they relate, never times. dir is its --out.
func checkBench(t *testing.T, res *report.Bench, dir string) {
	t.Helper()
	if !res.ChecksumsAgree || len(res.Checksum) != 16 {
		t.Errorf("checksums agree: %v, checksum %q", res.ChecksumsAgree, res.Checksum)
	}
	// The embedded scaffold's items: its configuration and the index of
	// each rule's source type.
	if res.Items < 2 || res.Jobs <= res.Items {
		t.Fatalf("%d items, %d jobs", res.Items, res.Jobs)
	}
	if len(res.Results) != len(res.Workers) {
		t.Fatalf("%d results for worker counts %v", len(res.Results), res.Workers)
	}
	for k, set := range res.Results {
		workers := res.Workers[k]
		if set.Workers != workers || len(set.Modes) != len(res.Modes) {
			t.Fatalf("result %d: %d workers, %d modes; want %d, %d", k+1, set.Workers, len(set.Modes), workers, len(res.Modes))
		}
		by := map[string]*report.BenchMode{}
		for m, mf := range set.Modes {
			if mf.Mode != res.Modes[m] {
				t.Errorf("%d workers: mode %d is %s, want %s", workers, m+1, mf.Mode, res.Modes[m])
			}
			by[mf.Mode] = mf
			checkBenchMode(t, res, workers, mf)
			if _, err := os.Stat(filepath.Join(dir, benchDir(workers), mf.Mode, "placement")); err != nil {
				t.Errorf("--out: %v", err)
			}
		}
		if m := by["plain"]; m != nil && m.Options != (report.CacheSettings{Evict: "pool-wide"}) {
			t.Errorf("plain's options %+v", m.Options)
		}
		if m := by["all"]; m != nil && m.Options != (report.CacheSettings{Evict: "stale", Affinity: true, IdleEviction: true}) {
			t.Errorf("all's options %+v", m.Options)
		}
		never, each, budget := by["never"], by["each-job"], by["budget"]
		for i := range res.Repeat {
			// The budget is half of never's largest worker peak in the
			// same round.
			if never != nil && budget != nil {
				var neverPeak float64
				for _, p := range never.Runs[i].WorkerPeakBytes {
					neverPeak = max(neverPeak, p)
				}
				if b := budget.Runs[i].CacheBudget; b != int64(neverPeak)/2 || b <= 0 || !budget.BudgetOfNever ||
					budget.Options != (report.CacheSettings{Evict: "stale", Affinity: true, IdleEviction: true}) {
					t.Errorf("%d workers, round %d: budget %d bytes (options %+v), never's largest worker peak %v", workers, i+1, b, budget.Options, neverPeak)
				}
			}
			// Under each-job every job builds what it needs: the
			// configuration, and for a connection job its index, whose
			// build gets the configuration the job built first (the only
			// hit). So a connection job makes 2 builds and 1 hit, a
			// placement job 1 build: fewer hits than half the builds.
			if each != nil {
				e := each.Runs[i]
				if e.Builds < float64(res.Jobs) || e.Hits == 0 || 2*e.Hits >= e.Builds {
					t.Errorf("%d workers, round %d: each-job built %v for %d jobs, with %v hits; want a build per job and item, a hit per connection job",
						workers, i+1, e.Builds, res.Jobs, e.Hits)
				}
			}
		}
	}
}

// checkBenchMode checks the runs of one mode at one worker count.
func checkBenchMode(t *testing.T, res *report.Bench, workers int, mf *report.BenchMode) {
	t.Helper()
	if len(mf.Runs) != res.Repeat {
		t.Fatalf("%d workers, %s: %d runs, want %d", workers, mf.Mode, len(mf.Runs), res.Repeat)
	}
	places := max(workers, 1) // serial: one place
	for i, r := range mf.Runs {
		where := func(format string, args ...any) {
			t.Helper()
			t.Errorf("%d workers, %s, run %d: "+format, append([]any{workers, mf.Mode, i + 1}, args...)...)
		}
		if r.Checksum != res.Checksum {
			where("checksum %s, want %s", r.Checksum, res.Checksum)
		}
		if len(r.Workers) != places || len(r.WorkerPeakBytes) != places || len(r.WorkerPeakRSS) != places {
			where("%d workers, %d cache peaks, %d RSS peaks; want %d", len(r.Workers), len(r.WorkerPeakBytes), len(r.WorkerPeakRSS), places)
			continue
		}
		// Every item built is evicted once: by the policy, by the budget,
		// or in the clear at the end of the pool.
		if r.Builds < float64(res.Items) || r.Evictions != r.Builds || r.StaleEvictions+r.BudgetEvictions > r.Evictions {
			where("%v builds, %v evictions (%v stale, %v for the budget); want at least %d builds, each evicted once",
				r.Builds, r.Evictions, r.StaleEvictions, r.BudgetEvictions, res.Items)
		}
		// Except under each-job and a budget, a worker builds an item at
		// most once: eviction never frees an item that a job still to run
		// on that worker needs. (Which workers build which items depends
		// on timing, so in one run a mode may build more than another,
		// per-worker more than plain, say; never more than once per
		// worker and item.)
		if mf.Mode != "each-job" && mf.Mode != "budget" && r.Builds > float64(places*res.Items) {
			where("%v builds of %d items on %d workers: some worker built an item twice", r.Builds, res.Items, places)
		}
		if mf.Mode != "budget" && r.BudgetEvictions != 0 {
			where("%v budget evictions without a budget", r.BudgetEvictions)
		}
		if mf.Mode == "never" && r.StaleEvictions != 0 {
			where("%v evictions while the pool ran", r.StaleEvictions)
		}
		var sum, rss float64
		for w := range places {
			sum += r.WorkerPeakBytes[w]
			rss = max(rss, r.WorkerPeakRSS[w])
			if float64(r.Workers[w].Cache.PeakBytes) != r.WorkerPeakBytes[w] || float64(r.Workers[w].PeakRSS) != r.WorkerPeakRSS[w] {
				where("worker %d: peaks %v and %v in its figures, %d and %d in its report", w+1,
					r.WorkerPeakBytes[w], r.WorkerPeakRSS[w], r.Workers[w].Cache.PeakBytes, r.Workers[w].PeakRSS)
			}
		}
		// What the workers held at once never exceeds the sum of what
		// each held at most.
		if r.PeakBytes != sum || r.SummedPeakBytes > r.PeakBytes || r.StaleByteSeconds < 0 {
			where("sum of peaks %v (workers' %v), peak of sum %v, stale %v byte-seconds", r.PeakBytes, sum, r.SummedPeakBytes, r.StaleByteSeconds)
		}
		// A worker process reports its VmHWM when it stops.
		if r.MaxPeakRSS != rss || runtime.GOOS == "linux" && rss <= 0 {
			where("largest peak RSS %v, workers' %v", r.MaxPeakRSS, r.WorkerPeakRSS)
		}
	}
	for _, get := range []func(*report.BenchFigures) float64{
		func(f *report.BenchFigures) float64 { return f.WallSeconds },
		func(f *report.BenchFigures) float64 { return f.Builds },
		func(f *report.BenchFigures) float64 { return f.SummedPeakBytes },
		func(f *report.BenchFigures) float64 { return f.MaxPeakRSS },
	} {
		if lo, mid, hi := get(&mf.Min), get(&mf.Median), get(&mf.Max); lo > mid || mid > hi {
			t.Errorf("%d workers, %s: min %v, median %v, max %v", workers, mf.Mode, lo, mid, hi)
		}
	}
}

// TestBenchModesAndCounts: --modes picks modes, shown in table order; -j
// and --serial give one worker count; --cache-budget fixes the budget
// mode's budget, so that it runs without never.
func TestBenchModesAndCounts(t *testing.T) {
	for _, c := range []struct {
		name    string
		args    []string
		workers []int
		modes   []string
		budget  int64 // the budget mode's, if it runs
	}{
		{"serial, fixed budget", []string{"--serial", "--modes", "budget, plain", "--cache-budget", "1MiB"}, []int{0}, []string{"plain", "budget"}, 1 << 20},
		{"-j", []string{"-j", "1", "--modes", "each-job,never"}, []int{1}, []string{"never", "each-job"}, 0},
		{"workers list", []string{"--workers", "1,0", "--modes", "all"}, []int{1, 0}, []string{"all"}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := slices.Concat(benchArgs, []string{"--json"}, c.args)
			if err := Main(context.Background(), args, &stdout, &stderr); err != nil {
				t.Fatalf("poolrun %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
			}
			var res report.Bench
			if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Workers, c.workers) || !slices.Equal(res.Modes, c.modes) || !res.ChecksumsAgree {
				t.Fatalf("workers %v, modes %v, checksums agree %v; want %v, %v, true", res.Workers, res.Modes, res.ChecksumsAgree, c.workers, c.modes)
			}
			for k, set := range res.Results {
				if set.Workers != c.workers[k] || len(set.Modes) != len(c.modes) {
					t.Fatalf("result %d: %d workers, %d modes", k+1, set.Workers, len(set.Modes))
				}
				for _, mf := range set.Modes {
					if n := len(mf.Runs[0].Workers); n != max(set.Workers, 1) {
						t.Errorf("%d workers, %s: %d worker places", set.Workers, mf.Mode, n)
					}
					if mf.Mode == "budget" && (mf.Runs[0].CacheBudget != c.budget || mf.Options.CacheBudget != c.budget || mf.BudgetOfNever) {
						t.Errorf("budget %d bytes (options %d, half of never %v), want %d", mf.Runs[0].CacheBudget, mf.Options.CacheBudget, mf.BudgetOfNever, c.budget)
					}
				}
			}
		})
	}
}

func TestBenchBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // in the error
	}{
		{[]string{"--repeat", "0"}, "--repeat"},
		{[]string{"--scale", "0"}, "--scale"},
		{[]string{"-j", "0"}, "-j 0"},
		{[]string{"extra"}, "extra"},
		{[]string{"--config", filepath.Join(t.TempDir(), "missing.yaml")}, "missing.yaml"},
		{[]string{"--workers", "2,x"}, "--workers"},
		{[]string{"--workers", "-1"}, "--workers"},
		{[]string{"--workers", ""}, "--workers"},
		{[]string{"--workers", "2,2"}, "given twice"},
		{[]string{"--workers", "2", "-j", "2"}, "only one of"},
		{[]string{"--serial", "-j", "2"}, "only one of"},
		{[]string{"--modes", "stale"}, `unknown mode "stale"`},
		{[]string{"--modes", "plain,"}, `unknown mode ""`},
		{[]string{"--modes", "all,budget"}, "budget needs never"},
		{[]string{"--cache-budget", "12MB"}, "--cache-budget 12MB"},
		{[]string{"--evict", "never"}, "unknown flag --evict"}, // the modes choose the policy
		{[]string{"--capacity", "0"}, "--capacity"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"bench"}, c.args...)
		err := Main(context.Background(), args, &stdout, &stderr)
		if ExitCode(err) != ExitBadInput || !strings.Contains(err.Error(), c.want) {
			t.Errorf("poolrun %s: %v (exit %d), want exit %d and an error naming %s", strings.Join(args, " "), err, ExitCode(err), ExitBadInput, c.want)
		}
	}
}

func TestBenchHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := Main(context.Background(), []string{"bench", "--help"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	want := append([]string{"Usage: poolrun bench", "Example:", "--workers COUNTS", "--modes MODES", "--cache-budget SIZE", "--repeat N", "peak of sum", "stale MiB·s"}, allModes...)
	for _, w := range want {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("--help lacks %q:\n%s", w, stdout.String())
		}
	}
}
