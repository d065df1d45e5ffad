package report

import (
	"fmt"
	"html/template"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/poolrun/poolrun/internal/human"
)

// benchPage is the page of a bench report: it holds each run's figures
// and its workers' cache peaks and peak RSS, not its jobs nor samples
// over time, so the page says so, and has a chart of the modes' medians
// and a table of every run per worker count.
type benchPage struct {
	frame
	Config, Runs, Check string
	Scale               float64
	Jobs, Items         int
	Modes               []benchModeRow
	Sets                []benchSetView
}

type benchModeRow struct{ Mode, Flags string }

type benchSetView struct {
	Title         string
	Width, Height px
	X1, X2        px
	Bars          []benchBarRow
	Budgets       bool
	Rows          []benchRow
}

type benchBarRow struct {
	Mode  string
	TextY px
	Pair  [2]benchBar
}

type benchBar struct {
	Class, Title, Label     string
	X, Y, W, LabelX, LabelY px
}

type benchRow struct {
	Class            string
	Cells, PerWorker []string
	Budget, Check    string
}

func renderBench(w io.Writer, b *Bench, src string) error {
	b = cleanBench(b)
	p := &benchPage{frame: frame{Title: "poolrun report: bench", Style: template.CSS(pageCSS), Src: clean(src)},
		Config: b.Config, Scale: b.Scale, Jobs: b.Jobs, Items: b.Items, Runs: "1 run per mode", Check: "checksums agree: " + b.Checksum}
	if b.Repeat > 1 {
		p.Runs = fmt.Sprintf("%d runs per mode", b.Repeat)
	}
	if !b.ChecksumsAgree {
		p.Check = "checksums DIFFER: the modes wrote different outputs"
	}
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
			p.Modes = append(p.Modes, benchModeRow{Mode: mf.Mode, Flags: flags})
		}
	}
	for _, set := range b.Results {
		p.Sets = append(p.Sets, benchSet(set, b))
	}
	return execute(w, "bench", p)
}

// benchModeFlags are the poolrun scaffold flags of a mode's settings.
func benchModeFlags(o CacheSettings) string {
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

// benchSet is the section of one worker count: per mode, its median peak
// of the summed cache and its median wall time as bars, each on its own
// scale, and a row per run with the medians where there are several.
func benchSet(set *BenchSet, b *Bench) benchSetView {
	const rowH, labelW, barW, barX2 = 22.0, 110.0, 520.0, 700.0
	title := fmt.Sprintf("%d workers", set.Workers)
	if set.Workers == 0 {
		title = "serial"
	}
	v := benchSetView{Title: title, Width: svgWidth, Height: px(24 + float64(len(set.Modes))*rowH), X1: labelW, X2: barX2}
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
	for i, mf := range set.Modes {
		y := 24 + float64(i)*rowH
		wb := max(mf.Median.SummedPeakBytes/topBytes*(barW-90), 1)
		ww := max(mf.Median.WallSeconds/topWall*(barW-90), 1)
		peak, wall := human.Bytes(int64(mf.Median.SummedPeakBytes)), human.Duration(secondsDur(mf.Median.WallSeconds))
		v.Bars = append(v.Bars, benchBarRow{Mode: mf.Mode, TextY: px(y + 13), Pair: [2]benchBar{
			{Class: "bar1", X: labelW, Y: px(y + 2), W: px(wb), Title: mf.Mode + ": peak of the summed cache " + peak, Label: peak, LabelX: px(labelW + wb + 6), LabelY: px(y + 13)},
			{Class: "bar2", X: barX2, Y: px(y + 2), W: px(ww), Title: mf.Mode + ": wall time " + wall, Label: wall, LabelX: px(barX2 + ww + 6), LabelY: px(y + 13)},
		}})
	}
	v.Budgets = slices.ContainsFunc(set.Modes, func(mf *BenchMode) bool {
		return slices.ContainsFunc(mf.Runs, func(r BenchRun) bool { return r.CacheBudget > 0 })
	})
	row := func(class, mode, run string, f *BenchFigures, r *BenchRun) benchRow {
		br := benchRow{Class: class, Cells: []string{mode, run, human.Duration(secondsDur(f.WallSeconds)), human.Count(f.Builds), human.Count(f.Hits), human.Count(f.Evictions),
			human.Bytes(int64(f.PeakBytes)), human.Bytes(int64(f.SummedPeakBytes)), human.MiBSeconds(f.StaleByteSeconds), human.RSS(int64(f.MaxPeakRSS))}}
		for i := range f.WorkerPeakBytes {
			rs := 0.0
			if i < len(f.WorkerPeakRSS) {
				rs = f.WorkerPeakRSS[i]
			}
			br.PerWorker = append(br.PerWorker, fmt.Sprintf("%d: %s / %s", i+1, human.Bytes(int64(f.WorkerPeakBytes[i])), human.RSS(int64(rs))))
		}
		if r != nil {
			if r.CacheBudget > 0 {
				br.Budget = human.Bytes(r.CacheBudget)
				if r.BudgetExceeded > 0 {
					br.Budget += fmt.Sprintf(" (exceeded by %d jobs)", r.BudgetExceeded)
				}
			}
			br.Check = r.Checksum
			if b.ChecksumsAgree {
				br.Check = "same"
			}
		}
		return br
	}
	for _, mf := range set.Modes {
		for i := range mf.Runs {
			r := &mf.Runs[i]
			v.Rows = append(v.Rows, row("", mf.Mode, strconv.Itoa(i+1), &r.BenchFigures, r))
		}
		if b.Repeat > 1 && len(mf.Runs) > 1 {
			v.Rows = append(v.Rows, row("median", mf.Mode, "median", &mf.Median, nil))
		}
	}
	return v
}
