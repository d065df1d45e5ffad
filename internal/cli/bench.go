package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/atomicfile"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/human"
	"github.com/poolrun/poolrun/internal/report"
	"github.com/poolrun/poolrun/internal/scaffold"
	"github.com/poolrun/poolrun/internal/scaffoldjobs"
	"github.com/spf13/pflag"
)

const benchUsage = `Usage: poolrun bench [flags]

Runs the scaffold workload (or --config FILE) in each of the modes below,
at each worker count of --workers, and prints one table, side by side.
`

const benchDetails = `Modes:
  plain       the engine before per-worker eviction: a worker frees an item
              once no unfinished job in the pool needs it (pool-wide), the
              oldest ready job goes to the first free worker, and a waiting
              worker evicts nothing (--evict pool-wide --no-affinity
              --no-idle-eviction)
  per-worker  a worker frees an item once no job sent to it and no job still
              to be sent needs it (--evict stale), without affinity or
              eviction while idle
  affinity    per-worker, and a free worker takes a ready job whose items it
              holds rather than the oldest one
  idle        per-worker, and a waiting worker evicts stale items within a
              millisecond rather than at its next job
  all         per-worker, affinity and idle eviction: poolrun's defaults
  never       a worker keeps every item it built until the end of the pool
              (--evict never), as sync.Once or a package-level map would
  each-job    a worker frees every item after every job (--evict each-job)
  budget      all, with each worker's cache capped (--cache-budget) at half
              of the largest cache peak of a worker under never, in the same
              round at the same worker count; or at --cache-budget SIZE

Columns:
  wall          the wall time
  builds        the items built, over the workers
  sum of peaks  the sum of the workers' own cache peaks (what they would hold
                if their peaks coincided)
  peak of sum   the peak over time of the cache they held together (what the
                host needed at once)
  stale MiB·s   the integral over time of the memory held in items that no
                unfinished job needed
  max RSS       the largest peak RSS (VmHWM) of a worker process (in serial
                mode: of this process, since it started)
  checksum      the checksum of the output, which must be the same in every
                mode at every worker count (the command fails if it is not)

--workers 2,4 (the default) runs every mode at 2 and then at 4 workers; 0
means serial. -j N alone means --workers N and --serial alone --workers 0;
give only one of the three. --modes picks some of the modes (they run and
are shown in the order above; budget needs never, unless --cache-budget
gives its budget).

With --repeat N every mode runs N times, in N rounds: in each round every
worker count runs every mode in turn, so that a machine that gets busier or
quieter affects them alike. The table then shows medians, with the lowest
and highest run in brackets where they differ.

The output goes to a private temporary folder, removed at the end (or, if
poolrun is killed, by the next poolrun run or bench), unless --out DIR is
given: DIR/j<N>/<mode> (DIR/serial/<mode>) then holds each mode's last
output. --json prints the figures of every run as JSON instead of the table,
with each worker's cache peak, peak RSS and evictions; --report FILE writes
that JSON to FILE as well.

Example:
  poolrun bench --scale 0.5 --repeat 3
  poolrun bench --config examples/scaffold-cerebellum.yaml --workers 4 --modes plain,all,never,budget
  poolrun bench -j 2 --json > bench.json
`

// A benchMode is one way of running the pool that poolrun bench compares:
// the same modes, in the same order, as BenchmarkHold in bench/.
type benchMode struct {
	name           string
	evict          engine.EvictPolicy
	affinity, idle bool
	// budget: CacheBudget of --cache-budget, or else of half of never's
	// largest worker peak in the same round at the same worker count.
	budget bool
}

// benchModes are the modes in table order; never comes before budget,
// which needs its peak.
var benchModes = []benchMode{
	{name: "plain", evict: engine.EvictPoolWide},
	{name: "per-worker", evict: engine.EvictStale},
	{name: "affinity", evict: engine.EvictStale, affinity: true},
	{name: "idle", evict: engine.EvictStale, idle: true},
	{name: "all", evict: engine.EvictStale, affinity: true, idle: true},
	{name: "never", evict: engine.EvictNever},
	{name: "each-job", evict: engine.EvictEachJob},
	{name: "budget", evict: engine.EvictStale, affinity: true, idle: true, budget: true},
}

// options are the mode's engine options, with budget as its cache budget.
func (m benchMode) options(budget int64) []engine.Option {
	opts := []engine.Option{engine.Evict(m.evict), engine.Affinity(m.affinity), engine.IdleEviction(m.idle)}
	if m.budget {
		opts = append(opts, engine.CacheBudget(budget))
	}
	return opts
}

type benchFlags struct {
	pool    poolFlags
	config  string
	out     string
	scale   float64
	repeat  int
	json    bool
	workers []int       // the worker counts, 0 for serial
	modes   []benchMode // in table order
	budget  byteSize    // the budget mode's budget; 0: half of never's peak
}

// runBench is poolrun bench: it parses the flags, loads the workload,
// makes the output folder, plans the table, runs every mode at every
// worker count in rounds, then summarises the runs and reports them. Each
// step is a method of benchRun.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	b := &benchRun{stdout: stdout, stderr: stderr}
	defer b.close()
	if done, err := b.parse(args); done || err != nil {
		return err
	}
	if err := b.load(); err != nil {
		return err
	}
	if err := b.makeOut(); err != nil {
		return err
	}
	b.plan()
	// The modes take turns, so that a machine that gets busier or quieter
	// during the benchmark affects them alike.
	for i := range b.f.repeat {
		if err := b.round(ctx, i); err != nil {
			return err
		}
	}
	b.summarise()
	return b.report()
}

// A benchRun is the state of one poolrun bench, which its steps fill in
// turn (see runBench).
type benchRun struct {
	stdout, stderr io.Writer

	f   benchFlags       // set by parse
	cfg *scaffold.Config // set by load, scaled

	// Set by makeOut.
	out  string // the output folder, absolute if --out
	keep bool   // out is --out's, kept at the end

	res *report.Bench // set by plan, filled by round and summarise

	undo []func() // run by close, the last first
}

// later has close call f, before what was given it earlier, as a defer
// in runBench would.
func (b *benchRun) later(f func()) { b.undo = append(b.undo, f) }

// close undoes what the steps did, the last first: it removes the
// temporary output folder.
func (b *benchRun) close() {
	for _, f := range slices.Backward(b.undo) {
		f()
	}
}

// parse parses the flags and the arguments and checks them; it is done
// after --help.
func (b *benchRun) parse(args []string) (done bool, err error) {
	f := &b.f
	var jobs int
	var workers, modes string
	fs := newFlagSet("bench", benchUsage, benchDetails)
	fs.StringVar(&workers, "workers", "2,4", "run every mode at each of these worker `COUNTS` (comma-separated; 0: serial)")
	fs.IntVarP(&jobs, "jobs", "j", 0, "run every mode at `N` workers only (as --workers N)")
	fs.BoolVar(&f.pool.serial, "serial", false, "run every mode serially only, in this process (as --workers 0)")
	fs.StringVar(&modes, "modes", "", "run only these `MODES` (comma-separated: "+strings.Join(benchModeNames(benchModes), ", ")+"; default: every mode)")
	fs.Var(&f.budget, "cache-budget", "the budget mode's per-worker cache budget, as `SIZE` (bytes, or e.g. 800KiB, 512MiB, 1.5GiB; default: half of never's largest worker peak)")
	f.pool.registerCommon(fs)
	fs.Lookup("quiet").Usage = "print no progress, only the table (or the JSON)"
	fs.Lookup("report").Usage = "write the figures of every run as JSON (as --json prints them) to `FILE`"
	fs.StringVar(&f.config, "config", "", "scaffold configuration `FILE` (YAML; default: the embedded one)")
	fs.StringVar(&f.out, "out", "", "keep each mode's output in `DIR`/j<N>/<mode> (default: a temporary folder, removed at the end)")
	fs.Float64Var(&f.scale, "scale", 1, "scale the volume (and so the work and memory) by `FACTOR`, e.g. 0.1 or 2")
	fs.IntVar(&f.repeat, "repeat", 1, "run each mode `N` times and show the medians")
	fs.BoolVar(&f.json, "json", false, "print the figures of every run as JSON instead of the table")
	if err := parseFlags(fs, args, b.stdout); err != nil {
		if errors.Is(err, errHelp) {
			return true, nil
		}
		return true, err
	}
	if fs.NArg() > 0 {
		return true, usageError(fs, fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	}
	return false, f.check(fs, workers, jobs, modes)
}

// check checks the flags together, and sets the worker counts and the
// modes from --workers, -j, --serial and --modes as given.
func (f *benchFlags) check(fs *pflag.FlagSet, workers string, jobs int, modes string) error {
	if err := f.pool.checkCommon(); err != nil {
		return err
	}
	var err error
	if f.workers, err = benchWorkers(fs, workers, jobs, f.pool.serial); err != nil {
		return err
	}
	if f.modes, err = parseBenchModes(modes, f.budget > 0); err != nil {
		return err
	}
	if !(f.scale > 0) || f.scale > 1000 {
		return badInputf("poolrun bench: --scale %v: want a factor above 0 and at most 1000", f.scale)
	}
	if f.repeat < 1 || f.repeat > maxRepeat {
		return badInputf("poolrun bench: --repeat %d: want a number of runs from 1 to %d", f.repeat, maxRepeat)
	}
	return nil
}

// load loads the scaffold configuration of --config and scales it.
func (b *benchRun) load() error {
	cfg, err := loadScaffoldConfig(b.f.config)
	if err != nil {
		return badInput(err)
	}
	b.cfg = cfg.Scaled(b.f.scale)
	return nil
}

// makeOut makes the folder of --out, or else a private temporary folder
// that close removes.
func (b *benchRun) makeOut() error {
	if b.f.out != "" {
		out, err := filepath.Abs(b.f.out)
		if err != nil {
			return badInput(err)
		}
		if err := os.MkdirAll(out, 0o777); err != nil {
			return badInput(fmt.Errorf("poolrun bench: output folder: %w", err))
		}
		b.out, b.keep = out, true
		return nil
	}
	// Temporary folders of benchmarks that were killed.
	execflow.SweepScratch("")
	// A private folder that the next poolrun's sweep removes should
	// this one be killed before it removes it itself.
	out, err := execflow.MakeTempDir("", "bench")
	if err != nil {
		return fmt.Errorf("poolrun bench: %w", err)
	}
	b.out = out
	b.later(func() { os.RemoveAll(out) })
	return nil
}

// plan lays out the results: a set per worker count, each with a mode per
// mode of the table, and no runs yet.
func (b *benchRun) plan() {
	f := &b.f
	b.res = &report.Bench{Command: "bench", Config: f.config, Scale: f.scale, Workers: f.workers,
		Modes: benchModeNames(f.modes), Repeat: f.repeat}
	if b.res.Config == "" {
		b.res.Config = "embedded"
	}
	for _, n := range f.workers {
		set := &report.BenchSet{Workers: n}
		for _, m := range f.modes {
			mf := &report.BenchMode{Mode: m.name, Options: report.CacheSettings{Evict: m.evict.String(), Affinity: m.affinity, IdleEviction: m.idle}}
			if m.budget {
				mf.Options.CacheBudget = int64(f.budget)
				mf.BudgetOfNever = f.budget == 0
			}
			set.Modes = append(set.Modes, mf)
		}
		b.res.Results = append(b.res.Results, set)
	}
}

// round runs round i (from 0): every mode once at every worker count.
func (b *benchRun) round(ctx context.Context, i int) error {
	for _, set := range b.res.Results {
		if err := b.runSet(ctx, i, set); err != nil {
			return err
		}
	}
	return nil
}

// runSet runs every mode once, in table order, at the worker count of set,
// adding each run to its mode.
func (b *benchRun) runSet(ctx context.Context, i int, set *report.BenchSet) error {
	var neverPeak int64 // never's largest worker peak in this round
	for k, m := range b.f.modes {
		budget, err := b.budget(m, set.Workers, neverPeak)
		if err != nil {
			return err
		}
		dir := filepath.Join(b.out, benchDir(set.Workers), m.name)
		run, err := b.runOne(ctx, set.Workers, m, budget, dir)
		if err != nil {
			return err
		}
		if !b.keep {
			os.RemoveAll(dir) // one output on disk at a time
		}
		if m.name == "never" {
			for _, w := range run.Workers {
				neverPeak = max(neverPeak, w.Cache.PeakBytes)
			}
		}
		set.Modes[k].Runs = append(set.Modes[k].Runs, run)
		if !b.f.pool.quiet {
			fmt.Fprintf(b.stderr, "poolrun bench: %s, %s, run %d of %d: %s, %d builds, peak of sum %s\n",
				benchWhere(set.Workers), m.name, i+1, b.f.repeat, human.Duration(secondsDur(run.WallSeconds)),
				int64(run.Builds), human.Bytes(int64(run.SummedPeakBytes)))
		}
	}
	return nil
}

// budget returns mode m's cache budget at the given worker count: that of
// --cache-budget, or for the budget mode without it half of neverPeak,
// never's largest worker peak in the same round.
func (b *benchRun) budget(m benchMode, workers int, neverPeak int64) (int64, error) {
	budget := int64(b.f.budget)
	if m.budget && budget == 0 {
		if budget = neverPeak / 2; budget == 0 {
			return 0, fmt.Errorf("poolrun bench: %s: never's workers held nothing, so there is no budget to derive; give --cache-budget", benchWhere(workers))
		}
	}
	return budget, nil
}

// summarise sets every mode's medians, lowest and highest figures, and
// whether the checksums of all runs agree (the checksum if they do).
func (b *benchRun) summarise() {
	res := b.res
	res.ChecksumsAgree = true
	for _, set := range res.Results {
		for _, mf := range set.Modes {
			summariseMode(mf)
			for _, r := range mf.Runs {
				if res.Checksum == "" {
					res.Checksum = r.Checksum
				}
				res.ChecksumsAgree = res.ChecksumsAgree && r.Checksum == res.Checksum
			}
		}
	}
	if !res.ChecksumsAgree {
		res.Checksum = ""
	}
}

// report writes the JSON to --report's file, prints it (--json) or the
// table, and fails if the checksums differ.
func (b *benchRun) report() error {
	if b.f.pool.report != "" || b.f.json {
		if err := b.writeJSON(); err != nil {
			return err
		}
	}
	if !b.f.json {
		printBench(b.stdout, b.res)
	}
	if !b.res.ChecksumsAgree {
		return errors.New("poolrun bench: the modes wrote different outputs (checksums differ)")
	}
	return nil
}

// writeJSON writes the results as JSON to the file of --report, if given,
// and to stdout under --json.
func (b *benchRun) writeJSON() error {
	data, err := json.MarshalIndent(b.res, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if b.f.pool.report != "" {
		if err := atomicfile.Write(b.f.pool.report, data); err != nil {
			return fmt.Errorf("poolrun bench: writing the report: %w", err)
		}
	}
	if b.f.json {
		if _, err := b.stdout.Write(data); err != nil {
			return err
		}
	}
	return nil
}

// maxRepeat bounds --repeat: a bench of many modes and worker counts
// already takes minutes per round.
const maxRepeat = 1000

// benchWorkers returns the worker counts that --workers, -j and --serial
// ask for; at most one of them may be given (--serial=false is not given).
func benchWorkers(fs *pflag.FlagSet, workers string, jobs int, serial bool) ([]int, error) {
	var given []string
	fs.Visit(func(fl *pflag.Flag) {
		switch {
		case fl.Name == "jobs":
			given = append(given, "-j")
		case fl.Name == "workers" || fl.Name == "serial" && serial:
			given = append(given, "--"+fl.Name)
		}
	})
	if len(given) > 1 {
		return nil, badInputf("poolrun bench: %s: give only one of --workers, -j and --serial", strings.Join(given, " and "))
	}
	switch {
	case slices.Contains(given, "-j"):
		if jobs < 1 || jobs > maxWorkers {
			return nil, badInputf("poolrun bench: -j %d: want a number of workers from 1 to %d (or --serial)", jobs, maxWorkers)
		}
		return []int{jobs}, nil
	case serial:
		return []int{0}, nil
	}
	var counts []int
	for _, s := range strings.Split(workers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 || n > maxWorkers {
			return nil, badInputf("poolrun bench: --workers %q: want worker counts from 0 (serial) to %d separated by commas, such as 2,4", workers, maxWorkers)
		}
		if slices.Contains(counts, n) {
			return nil, badInputf("poolrun bench: --workers %q: %d is given twice", workers, n)
		}
		counts = append(counts, n)
	}
	return counts, nil
}

// parseBenchModes returns the modes of a --modes list in table order; ""
// is every mode. The budget mode needs never unless its budget is fixed.
func parseBenchModes(list string, fixedBudget bool) ([]benchMode, error) {
	if list == "" {
		return benchModes, nil
	}
	want := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if !slices.ContainsFunc(benchModes, func(m benchMode) bool { return m.name == s }) {
			return nil, badInputf("poolrun bench: --modes %q: unknown mode %q; want some of %s", list, s, strings.Join(benchModeNames(benchModes), ", "))
		}
		want[s] = true
	}
	if want["budget"] && !want["never"] && !fixedBudget {
		return nil, badInputf("poolrun bench: --modes %q: budget needs never (its budget is half of never's largest worker peak), or --cache-budget SIZE", list)
	}
	var modes []benchMode
	for _, m := range benchModes {
		if want[m.name] {
			modes = append(modes, m)
		}
	}
	return modes, nil
}

func benchModeNames(modes []benchMode) []string {
	var names []string
	for _, m := range modes {
		names = append(names, m.name)
	}
	return names
}

// benchWhere names a worker count in messages.
func benchWhere(workers int) string {
	if workers == 0 {
		return "serial"
	}
	return fmt.Sprintf("%d workers", workers)
}

// benchDir is the folder, under --out, of a worker count's outputs.
func benchDir(workers int) string {
	if workers == 0 {
		return "serial"
	}
	return fmt.Sprintf("j%d", workers)
}

// runOne runs the workload once in mode m on the given number of workers
// (0: serial), with budget as the budget mode's budget, writing into dir
// (emptied first). It sets the workload's job and item counts in the
// results.
func (b *benchRun) runOne(ctx context.Context, workers int, m benchMode, budget int64, dir string) (report.BenchRun, error) {
	var run report.BenchRun
	where := fmt.Sprintf("poolrun bench: %s, %s", benchWhere(workers), m.name)
	if err := os.RemoveAll(dir); err != nil {
		return run, fmt.Errorf("%s: %w", where, err)
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return run, fmt.Errorf("%s: output folder: %w", where, err)
	}
	pf := b.f.pool
	pf.jobs, pf.serial = workers, workers == 0
	s := newSession(&pf, b.stderr)
	p := engine.New(append(s.options(), m.options(budget)...)...)
	plan, err := scaffoldjobs.Queue(p, b.cfg, dir)
	if err != nil {
		return run, err
	}
	defer plan.Close()
	b.res.Jobs, b.res.Items = len(plan.Place)+len(plan.Connect), 1+len(plan.IndexItems)
	wall, runErr := s.run(ctx, p)
	if runErr != nil {
		return run, fmt.Errorf("%s: %w", where, runErr)
	}
	sum, err := summarise(b.cfg, dir)
	if err != nil {
		return run, fmt.Errorf("%s: %w", where, err)
	}
	run.Checksum = sum.Checksum
	if m.budget {
		run.CacheBudget = budget
		run.BudgetExceeded = s.rec.Budget().Jobs
	}
	run.WallSeconds = wall.Seconds()
	measure(&run, p.Stats())
	return run, nil
}

// measure sets run's cache and memory figures from the pool's statistics.
func measure(run *report.BenchRun, st engine.Stats) {
	for _, w := range st.Workers {
		run.Workers = append(run.Workers, report.WorkerOf(w))
		run.WorkerPeakBytes = append(run.WorkerPeakBytes, float64(w.Cache.PeakBytes))
		run.WorkerPeakRSS = append(run.WorkerPeakRSS, float64(w.PeakRSS))
		run.MaxPeakRSS = max(run.MaxPeakRSS, float64(w.PeakRSS))
	}
	tot := st.Total()
	c := tot.Cache
	run.Builds, run.Hits, run.Evictions = float64(c.Builds), float64(c.Hits), float64(c.Evictions)
	run.StaleEvictions, run.BudgetEvictions = float64(tot.Evicted), float64(tot.BudgetEvicted)
	run.PeakBytes, run.SummedPeakBytes, run.StaleByteSeconds = float64(c.PeakBytes), float64(st.PeakCacheBytes), st.StaleByteSeconds
}

// summariseMode sets the median, lowest and highest figures of the runs.
func summariseMode(mf *report.BenchMode) {
	field := func(get func(*report.BenchFigures) *float64) {
		var vs []float64
		for i := range mf.Runs {
			vs = append(vs, *get(&mf.Runs[i].BenchFigures))
		}
		slices.Sort(vs)
		*get(&mf.Median) = median(vs)
		*get(&mf.Min) = vs[0]
		*get(&mf.Max) = vs[len(vs)-1]
	}
	for _, get := range []func(*report.BenchFigures) *float64{
		func(f *report.BenchFigures) *float64 { return &f.WallSeconds },
		func(f *report.BenchFigures) *float64 { return &f.Builds },
		func(f *report.BenchFigures) *float64 { return &f.Hits },
		func(f *report.BenchFigures) *float64 { return &f.Evictions },
		func(f *report.BenchFigures) *float64 { return &f.StaleEvictions },
		func(f *report.BenchFigures) *float64 { return &f.BudgetEvictions },
		func(f *report.BenchFigures) *float64 { return &f.PeakBytes },
		func(f *report.BenchFigures) *float64 { return &f.SummedPeakBytes },
		func(f *report.BenchFigures) *float64 { return &f.StaleByteSeconds },
		func(f *report.BenchFigures) *float64 { return &f.MaxPeakRSS },
	} {
		field(get)
	}
	// Every run has one entry per worker place: the same number.
	n := len(mf.Runs[0].WorkerPeakBytes)
	for _, s := range []*report.BenchFigures{&mf.Median, &mf.Min, &mf.Max} {
		s.WorkerPeakBytes, s.WorkerPeakRSS = make([]float64, n), make([]float64, n)
	}
	for w := range n {
		field(func(f *report.BenchFigures) *float64 { return &f.WorkerPeakBytes[w] })
		field(func(f *report.BenchFigures) *float64 { return &f.WorkerPeakRSS[w] })
	}
}

// median of sorted, non-empty vs.
func median(vs []float64) float64 {
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

func secondsDur(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// printBench prints the side-by-side table and the notes under it.
func printBench(w io.Writer, res *report.Bench) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workers\tmode\twall\tbuilds\tsum of peaks\tpeak of sum\tstale MiB·s\tmax RSS\tchecksum\t")
	bytes := func(get func(*report.BenchFigures) float64) func(*report.BenchFigures) string {
		return func(f *report.BenchFigures) string { return human.Bytes(int64(get(f))) }
	}
	for _, set := range res.Results {
		workers := strconv.Itoa(set.Workers)
		if set.Workers == 0 {
			workers = "serial"
		}
		for _, mf := range set.Modes {
			wall := func(f *report.BenchFigures) float64 { return f.WallSeconds }
			builds := func(f *report.BenchFigures) float64 { return f.Builds }
			sumPeaks := func(f *report.BenchFigures) float64 { return f.PeakBytes }
			peakSum := func(f *report.BenchFigures) float64 { return f.SummedPeakBytes }
			stale := func(f *report.BenchFigures) float64 { return f.StaleByteSeconds }
			rssMax := func(f *report.BenchFigures) float64 { return f.MaxPeakRSS }
			row := []string{
				workers,
				mf.Mode,
				spread(mf, wall, func(f *report.BenchFigures) string { return human.Duration(secondsDur(f.WallSeconds)) }),
				spread(mf, builds, func(f *report.BenchFigures) string { return human.Count(f.Builds) }),
				spread(mf, sumPeaks, bytes(sumPeaks)),
				spread(mf, peakSum, bytes(peakSum)),
				spread(mf, stale, func(f *report.BenchFigures) string { return human.MiBSeconds(f.StaleByteSeconds) }),
				spread(mf, rssMax, func(f *report.BenchFigures) string { return human.RSS(int64(f.MaxPeakRSS)) }),
			}
			sums := map[string]bool{}
			for _, r := range mf.Runs {
				sums[r.Checksum] = true
			}
			check := mf.Runs[0].Checksum
			if len(sums) > 1 {
				check = "runs differ"
			}
			row = append(row, check)
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
	}
	tw.Flush()
	runs := "1 run per mode"
	if res.Repeat > 1 {
		runs = fmt.Sprintf("medians of %d runs per mode (lowest–highest)", res.Repeat)
	}
	fmt.Fprintf(w, "%s workload at scale %g: %d jobs, %d cache items; %s\n", res.Config, res.Scale, res.Jobs, res.Items, runs)
	if budgets := benchBudgets(res); budgets != "" {
		fmt.Fprintln(w, budgets)
	}
	if res.ChecksumsAgree {
		fmt.Fprintf(w, "checksums agree: %s (the output is the same in every mode at every worker count)\n", res.Checksum)
	} else {
		fmt.Fprintln(w, "checksums DIFFER: the modes wrote different outputs")
	}
}

// benchBudgets says what budget the budget mode had at each worker count,
// and how often a job's own items exceeded it; "" if it did not run.
func benchBudgets(res *report.Bench) string {
	var parts []string
	half := false
	for _, set := range res.Results {
		for _, mf := range set.Modes {
			if mf.Mode != "budget" {
				continue
			}
			half = mf.BudgetOfNever
			lo, hi := int64(math.MaxInt64), int64(0)
			exceeded := 0
			for _, r := range mf.Runs {
				lo, hi = min(lo, r.CacheBudget), max(hi, r.CacheBudget)
				exceeded += r.BudgetExceeded
			}
			s := human.Bytes(lo)
			if hi != lo {
				s += "–" + human.Bytes(hi)
			}
			s += " per worker at " + benchWhere(set.Workers)
			if exceeded > 0 {
				s += fmt.Sprintf(" (exceeded by the own items of %d jobs)", exceeded)
			}
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	if half {
		return "budget (half of never's largest worker peak): " + strings.Join(parts, ", ")
	}
	return "budget: " + strings.Join(parts, ", ")
}

// spread shows a figure's median, and its lowest and highest runs when they
// differ.
func spread(mf *report.BenchMode, get func(*report.BenchFigures) float64, show func(*report.BenchFigures) string) string {
	s := show(&mf.Median)
	if get(&mf.Min) != get(&mf.Max) {
		s += fmt.Sprintf(" (%s–%s)", show(&mf.Min), show(&mf.Max))
	}
	return s
}
