package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/scaffold"
	"github.com/poolrun/poolrun/internal/scaffoldjobs"
)

const scaffoldUsage = `Usage: poolrun scaffold [flags]
       poolrun [flags]

Builds a scaffold of cells and connections in the spirit of the Brain
Scaffold Builder, on a pool of worker processes: one job places the cells of
one type in one chunk of the volume; then one job per connection rule and
chunk connects them. Each connection job needs the spatial index of the
rule's source cell type, an expensive, memory-heavy cache item: every worker
builds it once and frees it as soon as no unfinished job needs it.
`

const scaffoldDetails = `Output files go under --out; each is written under a temporary name and
renamed, so an interrupted run never leaves half a file. The result is the
same for any -j, for --serial and for any eviction policy: compare the
"checksum:" line. With --listen, the --out folder must be on storage that
every host sees, at the same path: a worker (poolrun worker) that cannot
write there is refused when it joins.

A --config file that is not a regular file (a pipe, a device, a folder) or
is larger than 16 MiB (scaffold.MaxConfigSize) is refused (exit status 2).
-j is capped at the number of jobs (cell types and rules, times chunks): no
worker starts only to wait.

Example:
  poolrun scaffold -j 2 --scale 0.5 --report report.json
  poolrun scaffold --print-config > my.yaml   # edit, then:
  poolrun scaffold --config my.yaml
`

type scaffoldFlags struct {
	pool        poolFlags
	config      string
	printConfig bool
	out         string
	scale       float64
}

// scaffoldResult is the scaffold part of the JSON report.
type scaffoldResult struct {
	Out         string           `json:"out"`
	Cells       map[string]int64 `json:"cells"`
	Connections map[string]int64 `json:"connections"`
	Checksum    string           `json:"checksum"`
}

func runScaffold(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f scaffoldFlags
	fs := newFlagSet("scaffold", scaffoldUsage, scaffoldDetails)
	f.pool.register(fs)
	fs.StringVar(&f.config, "config", "", "scaffold configuration `FILE` (YAML; default: the embedded one)")
	fs.BoolVar(&f.printConfig, "print-config", false, "print the embedded configuration and exit")
	fs.StringVar(&f.out, "out", "poolrun-out", "write the output files to `DIR`")
	fs.Float64Var(&f.scale, "scale", 1, "scale the volume (and so the work and memory) by `FACTOR`, e.g. 0.1 or 2")
	if err := parseFlags(fs, args, stdout); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fs, fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	}
	if f.printConfig {
		_, err := stdout.Write(scaffold.DefaultConfig())
		return err
	}
	if err := f.pool.check(); err != nil {
		return err
	}
	if !(f.scale > 0) || f.scale > 1000 {
		return badInputf("poolrun scaffold: --scale %v: want a factor above 0 and at most 1000", f.scale)
	}
	cfg, err := loadScaffoldConfig(f.config)
	if err != nil {
		return badInput(err)
	}
	cfg = cfg.Scaled(f.scale)
	f.pool.capWorkers(scaffoldJobs(cfg))
	out, err := filepath.Abs(f.out)
	if err != nil {
		return badInput(err)
	}
	if err := os.MkdirAll(out, 0o777); err != nil {
		return badInput(fmt.Errorf("poolrun scaffold: output folder: %w", err))
	}
	// Temporary files of a run that was killed: never a result; and the
	// folders of poolrun processes that were (a bench's, say).
	scaffold.RemoveTemp(out)
	execflow.SweepScratch("")

	s := newSession(&f.pool, stderr)
	if err := s.listen(out); err != nil {
		return err
	}
	defer s.closeListener()
	p := engine.New(s.options()...)
	plan, err := scaffoldjobs.Queue(p, cfg, out)
	if err != nil {
		return err
	}
	defer plan.Close() // the configuration's file, should Run not get to remove it
	items := []cachepool.Handle{plan.ConfigItem}
	for _, h := range plan.IndexItems {
		items = append(items, h)
	}
	if f := openNames(items); f != nil {
		defer f.Close()
	}
	wall, runErr := s.run(ctx, p)
	if _, err := scaffold.RemoveTemp(out); err != nil && runErr == nil {
		runErr = err
	}
	var res *scaffoldResult
	if runErr == nil {
		res, err = summarise(cfg, out)
		if err != nil {
			return err
		}
	}
	if err := s.finish(stdout, "scaffold", p, runErr, wall, res); err != nil {
		return err
	}
	printScaffold(stdout, cfg, res)
	return nil
}

func loadScaffoldConfig(path string) (*scaffold.Config, error) {
	if path == "" {
		return scaffold.Default(), nil
	}
	cfg, err := scaffold.LoadConfig(path)
	if err != nil && !isConfigError(err) {
		return nil, fmt.Errorf("poolrun scaffold: %w", err)
	}
	return cfg, err
}

// isConfigError reports whether err is a problem found in a configuration
// (FILE:LINE: ...), which needs no prefix.
func isConfigError(err error) bool {
	var ce *scaffold.ConfigError
	return errors.As(err, &ce)
}

// scaffoldJobs is the number of jobs scaffoldjobs.Queue queues for cfg: one
// per cell type and chunk, and one per rule and chunk.
func scaffoldJobs(cfg *scaffold.Config) int {
	return len(cfg.Chunks()) * (len(cfg.CellTypes) + len(cfg.Rules))
}

func summarise(cfg *scaffold.Config, out string) (*scaffoldResult, error) {
	sum, err := scaffold.Checksum(cfg, out)
	if err != nil {
		return nil, err
	}
	counts, err := scaffold.Summary(cfg, out)
	if err != nil {
		return nil, err
	}
	res := &scaffoldResult{Out: out, Cells: map[string]int64{}, Connections: map[string]int64{}, Checksum: fmt.Sprintf("%016x", sum)}
	for _, c := range counts.Cells {
		res.Cells[c.Name] = c.N
	}
	for _, c := range counts.Connections {
		res.Connections[c.Name] = c.N
	}
	return res, nil
}

func printScaffold(w io.Writer, cfg *scaffold.Config, res *scaffoldResult) {
	var cells, conns []string
	for _, ct := range cfg.CellTypes {
		cells = append(cells, fmt.Sprintf("%s %d", ct.Name, res.Cells[ct.Name]))
	}
	for _, r := range cfg.Rules {
		conns = append(conns, fmt.Sprintf("%s %d", r.Name, res.Connections[r.Name]))
	}
	fmt.Fprintf(w, "cells: %s\n", strings.Join(cells, ", "))
	fmt.Fprintf(w, "connections: %s\n", strings.Join(conns, ", "))
	fmt.Fprintf(w, "output: %s\n", res.Out)
	fmt.Fprintf(w, "checksum: %s\n", res.Checksum)
}
