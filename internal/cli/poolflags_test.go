package cli

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/scaffold"
	"github.com/poolrun/poolrun/internal/scaffoldjobs"
)

func TestPoolFlagsCheck(t *testing.T) {
	for _, tt := range []struct {
		name    string
		f       poolFlags
		ok      bool
		workers int
		capTo   int // capWorkers(capTo) before workers()
		capped  int
	}{
		{name: "workers", f: poolFlags{jobs: 4, capacity: 1000}, ok: true, workers: 4, capTo: 0, capped: 4},
		{name: "-j 0 is serial", f: poolFlags{jobs: 0, capacity: 1000}, ok: true, workers: 0, capTo: 3, capped: 0},
		{name: "--serial -j 0", f: poolFlags{jobs: 0, serial: true, capacity: 1000}, ok: true, workers: 0, capTo: 3, capped: 0},
		{name: "--serial -j 4", f: poolFlags{jobs: 4, serial: true, capacity: 1000}, ok: true, workers: 0, capTo: 3, capped: 0},
		{name: "capped", f: poolFlags{jobs: 8, capacity: 1000}, ok: true, workers: 8, capTo: 3, capped: 3},
		{name: "below the cap", f: poolFlags{jobs: 2, capacity: 1000}, ok: true, workers: 2, capTo: 3, capped: 2},
		{name: "largest capacity", f: poolFlags{jobs: 1, capacity: maxCapacity}, ok: true, workers: 1, capped: 1},
		{name: "negative -j", f: poolFlags{jobs: -1, capacity: 1000}},
		{name: "capacity 0", f: poolFlags{jobs: 1, capacity: 0}},
		{name: "capacity too large", f: poolFlags{jobs: 1, capacity: maxCapacity + 1}},
		{name: "report in a folder", f: poolFlags{jobs: 1, capacity: 1000, report: filepath.Join(t.TempDir(), "r.json")}, ok: true, workers: 1, capped: 1},
		{name: "report in a missing folder", f: poolFlags{jobs: 1, capacity: 1000, report: filepath.Join(t.TempDir(), "missing", "r.json")}},
		{name: "report is a folder", f: poolFlags{jobs: 1, capacity: 1000, report: t.TempDir()}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.f.check()
			if (err == nil) != tt.ok {
				t.Fatalf("check() = %v, want ok %v", err, tt.ok)
			}
			if err != nil {
				if ExitCode(err) != ExitBadInput {
					t.Errorf("exit status %d for %v, want %d", ExitCode(err), err, ExitBadInput)
				}
				return
			}
			if got := tt.f.workers(); got != tt.workers {
				t.Errorf("workers() = %d, want %d", got, tt.workers)
			}
			tt.f.capWorkers(tt.capTo)
			if got := tt.f.workers(); got != tt.capped {
				t.Errorf("after capWorkers(%d), workers() = %d, want %d", tt.capTo, got, tt.capped)
			}
		})
	}
}

// scaffoldJobs counts the jobs that scaffoldjobs.Queue queues.
func TestScaffoldJobsCount(t *testing.T) {
	for _, scale := range []float64{0.1, 1} {
		cfg := scaffold.Default().Scaled(scale)
		p := engine.New(engine.Workers(0))
		plan, err := scaffoldjobs.Queue(p, cfg, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		queued := 0
		for _, n := range p.Stats().Counts {
			queued += n
		}
		if got := scaffoldJobs(cfg); got != queued || got != len(plan.Place)+len(plan.Connect) {
			t.Errorf("scale %v: scaffoldJobs = %d, Queue queued %d", scale, got, queued)
		}
		// End the pool without running a job: the plan's file goes.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		p.Run(ctx)
		plan.Close()
	}
}
