package scaffoldjobs_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/scaffold"
	"github.com/poolrun/poolrun/internal/scaffoldjobs"
)

func TestMain(m *testing.M) {
	engine.Init()
	// A race-enabled program sleeps a second when it exits (the race
	// detector's atexit_sleep_ms), which every pool's end would wait for;
	// the worker processes skip it.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}

// reference runs the workload in one goroutine, as scaffold's Example
// does, and returns its checksum.
func reference(t *testing.T, cfg *scaffold.Config) uint64 {
	out := t.TempDir()
	for _, ct := range cfg.CellTypes {
		for _, ch := range cfg.Chunks() {
			if _, err := scaffold.Place(cfg, ct.Name, ch, out); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, typ := range cfg.SourceTypes() {
		ix, err := scaffold.BuildIndex(cfg, typ, out, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range cfg.RulesFrom(typ) {
			for _, ch := range cfg.Chunks() {
				if _, err := scaffold.Connect(cfg, r, ch, ix, out); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	sum, err := scaffold.Checksum(cfg, out)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// TestPoolMatchesReference runs the workload as jobs on real workers and
// serially: the output is the reference's, every index (and the
// configuration) is built at most once per worker, and no worker holds an
// item at the end.
func TestPoolMatchesReference(t *testing.T) {
	cfg := scaffold.Default().Scaled(0.002)
	want := reference(t, cfg)
	for _, workers := range []int{2, 0} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			out := t.TempDir()
			p := engine.New(engine.Workers(workers))
			plan, err := scaffoldjobs.Queue(p, cfg, out)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(plan.Place); n != len(cfg.CellTypes)*len(cfg.Chunks()) {
				t.Errorf("%d placement jobs", n)
			}
			if n := len(plan.Connect); n != len(cfg.Rules)*len(cfg.Chunks()) {
				t.Errorf("%d connection jobs", n)
			}
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			got, err := scaffold.Checksum(cfg, out)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("checksum %016x, reference %016x", got, want)
			}
			for _, w := range p.Stats().Workers {
				// Builds counts every item: the indexes and the configuration.
				if w.Cache.Builds > uint64(len(plan.IndexItems))+1 {
					t.Errorf("worker %d built %d items, there are %d indexes and 1 configuration", w.Index, w.Cache.Builds, len(plan.IndexItems))
				}
				if w.Cache.Resident != 0 || w.Cache.Evictions != w.Cache.Builds {
					t.Errorf("worker %d at the end: %+v", w.Index, w.Cache)
				}
			}
		})
	}
}
