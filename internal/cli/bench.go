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
	"strings"
	"text/tabwriter"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/scaffold"
	"github.com/poolrun/poolrun/internal/scaffoldjobs"
)

const benchUsage = `Usage: poolrun bench [flags]

Runs the scaffold workload (or --config FILE) under each eviction policy and
prints one table, side by side:

  stale     the default: a worker frees an item as soon as no unfinished job
            in the pool needs it any more
  never     a worker keeps every item it built until the end of the pool,
            as sync.Once or a package-level map would
  each-job  a worker frees every item after every job

Columns: wall time; index builds, cache hits and evictions, summed over the
workers; each worker's peak cache memory and their total; the checksum of
the output, which must be the same under every policy (the command fails if
it is not). With --repeat N every policy runs N times, the policies taking
turns, and the table shows medians, with the lowest and highest run in
brackets where they differ.

The output goes to a temporary folder, removed at the end, unless --out DIR
is given: DIR/<policy> then holds each policy's last output. --json prints
the figures of every run as JSON instead of the table; --report FILE writes
that JSON to FILE as well.

Example:
  poolrun bench -j 2 --scale 0.5 --repeat 3
  poolrun bench --config my.yaml --json > bench.json
`

// benchPolicies are the policies poolrun bench compares, in table order.
var benchPolicies = []engine.EvictPolicy{engine.EvictStale, engine.EvictNever, engine.EvictEachJob}

type benchFlags struct {
	pool   poolFlags
	config string
	out    string
	scale  float64
	repeat int
	json   bool
}

// benchResult is what poolrun bench measured; --json prints it.
type benchResult struct {
	Command  string         `json:"command"`
	Config   string         `json:"config"` // the file, or "embedded"
	Scale    float64        `json:"scale"`
	Workers  int            `json:"workers"` // 0: serial
	Repeat   int            `json:"repeat"`
	Policies []*benchPolicy `json:"policies"`
	// ChecksumsAgree is true when every run of every policy wrote the same
	// output; Checksum is that output's checksum.
	ChecksumsAgree bool   `json:"checksums_agree"`
	Checksum       string `json:"checksum,omitempty"`
}

// benchPolicy holds the runs of one policy and their median, lowest and
// highest figures.
type benchPolicy struct {
	Policy string       `json:"policy"`
	Runs   []benchRun   `json:"runs"`
	Median benchFigures `json:"median"`
	Min    benchFigures `json:"min"`
	Max    benchFigures `json:"max"`
}

// benchRun is one pool run.
type benchRun struct {
	benchFigures
	Checksum string         `json:"checksum"`
	Workers  []workerReport `json:"workers"`
}

// benchFigures are the figures of the table. Counts and bytes are summed
// over the workers; PeakBytes sums each worker's own peak, which
// WorkerPeakBytes lists by worker.
type benchFigures struct {
	WallSeconds     float64   `json:"wall_seconds"`
	Builds          float64   `json:"builds"`
	Hits            float64   `json:"hits"`
	Evictions       float64   `json:"evictions"`
	PeakBytes       float64   `json:"peak_cache_bytes"`
	WorkerPeakBytes []float64 `json:"worker_peak_cache_bytes"`
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f benchFlags
	fs := newFlagSet("bench", benchUsage, stderr)
	f.pool.register(fs)
	fs.StringVar(&f.config, "config", "", "scaffold configuration `FILE` (YAML; default: the embedded one)")
	fs.StringVar(&f.out, "out", "", "keep each policy's output in `DIR`/<policy> (default: a temporary folder, removed at the end)")
	fs.Float64Var(&f.scale, "scale", 1, "scale the volume (and so the work and memory) by this `factor`, e.g. 0.1 or 2")
	fs.IntVar(&f.repeat, "repeat", 1, "run each policy `N` times and show the medians")
	fs.BoolVar(&f.json, "json", false, "print the figures of every run as JSON instead of the table")
	if err := parseFlags(fs, args, stdout); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return badInputf("poolrun bench: unexpected argument %q", fs.Arg(0))
	}
	if err := f.pool.check(); err != nil {
		return err
	}
	if !(f.scale > 0) || f.scale > 1000 {
		return badInputf("poolrun bench: --scale %v: want a factor above 0 and at most 1000", f.scale)
	}
	if f.repeat < 1 {
		return badInputf("poolrun bench: --repeat %d: want at least 1", f.repeat)
	}
	cfg, err := loadScaffoldConfig(f.config)
	if err != nil {
		return badInput(err)
	}
	cfg = cfg.Scaled(f.scale)

	keep := f.out != ""
	out := f.out
	if keep {
		if out, err = filepath.Abs(out); err != nil {
			return badInput(err)
		}
		if err := os.MkdirAll(out, 0o755); err != nil {
			return badInput(fmt.Errorf("poolrun bench: output folder: %w", err))
		}
	} else {
		if out, err = os.MkdirTemp("", "poolrun-bench-*"); err != nil {
			return fmt.Errorf("poolrun bench: %w", err)
		}
		defer os.RemoveAll(out)
	}

	res := &benchResult{Command: "bench", Config: f.config, Scale: f.scale, Workers: f.pool.workers(), Repeat: f.repeat}
	if res.Config == "" {
		res.Config = "embedded"
	}
	for _, pol := range benchPolicies {
		res.Policies = append(res.Policies, &benchPolicy{Policy: pol.String()})
	}
	// The policies take turns, so that a machine that gets busier or
	// quieter during the benchmark affects them alike.
	for i := range f.repeat {
		for k, pol := range benchPolicies {
			dir := filepath.Join(out, pol.String())
			run, err := benchOnce(ctx, &f, stderr, cfg, pol, dir)
			if err != nil {
				return err
			}
			if !keep {
				os.RemoveAll(dir) // one output on disk at a time
			}
			res.Policies[k].Runs = append(res.Policies[k].Runs, run)
			if !f.pool.quiet {
				fmt.Fprintf(stderr, "poolrun bench: %s, run %d of %d: %s, %d builds, peak cache %s\n",
					pol, i+1, f.repeat, roundDur(secondsDur(run.WallSeconds)), int64(run.Builds), humanBytes(int64(run.PeakBytes)))
			}
		}
	}
	res.ChecksumsAgree = true
	for _, bp := range res.Policies {
		bp.summarise()
		for _, r := range bp.Runs {
			if res.Checksum == "" {
				res.Checksum = r.Checksum
			}
			res.ChecksumsAgree = res.ChecksumsAgree && r.Checksum == res.Checksum
		}
	}
	if !res.ChecksumsAgree {
		res.Checksum = ""
	}

	if f.pool.report != "" || f.json {
		data, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		data = append(data, '\n')
		if f.pool.report != "" {
			if err := writeFileAtomic(f.pool.report, data); err != nil {
				return fmt.Errorf("poolrun bench: writing the report: %w", err)
			}
		}
		if f.json {
			if _, err := stdout.Write(data); err != nil {
				return err
			}
		}
	}
	if !f.json {
		printBench(stdout, res)
	}
	if !res.ChecksumsAgree {
		return errors.New("poolrun bench: the policies wrote different outputs (checksums differ)")
	}
	return nil
}

// benchOnce runs the workload of cfg once under pol, writing into dir
// (emptied first).
func benchOnce(ctx context.Context, f *benchFlags, stderr io.Writer, cfg *scaffold.Config, pol engine.EvictPolicy, dir string) (benchRun, error) {
	var run benchRun
	if err := os.RemoveAll(dir); err != nil {
		return run, fmt.Errorf("poolrun bench: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return run, fmt.Errorf("poolrun bench: output folder: %w", err)
	}
	s := newSession(&f.pool, stderr)
	p := engine.New(append(s.options(), engine.Evict(pol))...)
	plan, err := scaffoldjobs.Queue(p, cfg, dir)
	if err != nil {
		return run, err
	}
	defer plan.Close()
	wall, runErr := s.run(ctx, p)
	if runErr != nil {
		return run, fmt.Errorf("poolrun bench: policy %s: %w", pol, runErr)
	}
	sum, err := summarise(cfg, dir)
	if err != nil {
		return run, fmt.Errorf("poolrun bench: policy %s: %w", pol, err)
	}
	run.Checksum = sum.Checksum
	run.WallSeconds = wall.Seconds()
	st := p.Stats()
	for _, w := range st.Workers {
		run.Workers = append(run.Workers, reportWorker(w))
		run.WorkerPeakBytes = append(run.WorkerPeakBytes, float64(w.Cache.PeakBytes))
	}
	tot := st.Total().Cache
	run.Builds, run.Hits = float64(tot.Builds), float64(tot.Hits)
	run.Evictions, run.PeakBytes = float64(tot.Evictions), float64(tot.PeakBytes)
	return run, nil
}

// summarise sets the median, lowest and highest figures of the runs.
func (bp *benchPolicy) summarise() {
	field := func(get func(*benchFigures) *float64) {
		var vs []float64
		for i := range bp.Runs {
			vs = append(vs, *get(&bp.Runs[i].benchFigures))
		}
		slices.Sort(vs)
		*get(&bp.Median) = median(vs)
		*get(&bp.Min) = vs[0]
		*get(&bp.Max) = vs[len(vs)-1]
	}
	field(func(f *benchFigures) *float64 { return &f.WallSeconds })
	field(func(f *benchFigures) *float64 { return &f.Builds })
	field(func(f *benchFigures) *float64 { return &f.Hits })
	field(func(f *benchFigures) *float64 { return &f.Evictions })
	field(func(f *benchFigures) *float64 { return &f.PeakBytes })
	n := len(bp.Runs[0].WorkerPeakBytes)
	for _, s := range []*benchFigures{&bp.Median, &bp.Min, &bp.Max} {
		s.WorkerPeakBytes = make([]float64, n)
	}
	for w := range n {
		field(func(f *benchFigures) *float64 { return &f.WorkerPeakBytes[w] })
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

// printBench prints the side-by-side table.
func printBench(w io.Writer, res *benchResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := []string{"policy", "wall", "builds", "hits", "evictions"}
	nw := len(res.Policies[0].Median.WorkerPeakBytes)
	for i := range nw {
		cols = append(cols, fmt.Sprintf("peak w%d", i+1))
	}
	cols = append(cols, "peak total", "checksum")
	fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
	for _, bp := range res.Policies {
		wall := func(f *benchFigures) string { return roundDur(secondsDur(f.WallSeconds)) }
		count := func(f *benchFigures) string { return trimFloat(f.Builds) }
		row := []string{
			bp.Policy,
			spread(bp, func(f *benchFigures) float64 { return f.WallSeconds }, wall),
			spread(bp, func(f *benchFigures) float64 { return f.Builds }, count),
			spread(bp, func(f *benchFigures) float64 { return f.Hits }, func(f *benchFigures) string { return trimFloat(f.Hits) }),
			spread(bp, func(f *benchFigures) float64 { return f.Evictions }, func(f *benchFigures) string { return trimFloat(f.Evictions) }),
		}
		for i := range nw {
			row = append(row, spread(bp, func(f *benchFigures) float64 { return f.WorkerPeakBytes[i] },
				func(f *benchFigures) string { return humanBytes(int64(f.WorkerPeakBytes[i])) }))
		}
		row = append(row, spread(bp, func(f *benchFigures) float64 { return f.PeakBytes },
			func(f *benchFigures) string { return humanBytes(int64(f.PeakBytes)) }))
		sums := map[string]bool{}
		for _, r := range bp.Runs {
			sums[r.Checksum] = true
		}
		check := bp.Runs[0].Checksum
		if len(sums) > 1 {
			check = "runs differ"
		}
		row = append(row, check)
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
	workers := fmt.Sprintf("%d workers", res.Workers)
	if res.Workers == 0 {
		workers = "serial"
	}
	runs := "1 run per policy"
	if res.Repeat > 1 {
		runs = fmt.Sprintf("medians of %d runs per policy (lowest–highest)", res.Repeat)
	}
	fmt.Fprintf(w, "%s workload at scale %g, %s; %s\n", res.Config, res.Scale, workers, runs)
	if res.ChecksumsAgree {
		fmt.Fprintf(w, "checksums agree: %s (the output is the same under every policy)\n", res.Checksum)
	} else {
		fmt.Fprintln(w, "checksums DIFFER: the policies wrote different outputs")
	}
}

// spread shows a figure's median, and its lowest and highest runs when they
// differ.
func spread(bp *benchPolicy, get func(*benchFigures) float64, show func(*benchFigures) string) string {
	s := show(&bp.Median)
	if get(&bp.Min) != get(&bp.Max) {
		s += fmt.Sprintf(" (%s–%s)", show(&bp.Min), show(&bp.Max))
	}
	return s
}

// trimFloat prints a count, which is whole unless it is the median of an
// even number of runs.
func trimFloat(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
