package scaffoldjobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/scaffold"
)

// resident reports which of the given keys the running worker's cache holds.
var resident = engine.Register("scaffoldjobs_test.resident", func(ctx context.Context, keys []uint64) ([]bool, error) {
	c := cachepool.FromContext(ctx)
	out := make([]bool, len(keys))
	for i, k := range keys {
		out[i] = c.Has(k)
	}
	return out, nil
})

// allJobs returns the plan's jobs as dependencies.
func allJobs(plan *Plan) []engine.Dep {
	var deps []engine.Dep
	for _, j := range slices.Concat(plan.Place, plan.Connect) {
		deps = append(deps, j)
	}
	return deps
}

// leftovers returns the entries of out other than the scaffold's output
// folders.
func leftovers(t *testing.T, out string) []string {
	t.Helper()
	es, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		if n := e.Name(); n != "placement" && n != "connectivity" {
			names = append(names, n)
		}
	}
	return names
}

// TestConfigItemBuiltOnce checks, with worker processes and serially, that
// every worker that ran a job built the configuration exactly once (the
// configuration alone: no rules, so no index) or at most once (the whole
// workload: Builds counts the indexes too), and that no worker holds it at
// the end.
func TestConfigItemBuiltOnce(t *testing.T) {
	noRules := scaffold.Default().Scaled(0.002)
	noRules.Rules = nil
	tests := []struct {
		name    string
		cfg     *scaffold.Config
		workers int
	}{
		{"placement/workers=2", noRules, 2},
		{"placement/workers=0", noRules, 0},
		{"all/workers=2", scaffold.Default().Scaled(0.002), 2},
		{"all/workers=0", scaffold.Default().Scaled(0.002), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := engine.New(engine.Workers(tt.workers))
			plan, err := Queue(p, tt.cfg, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := p.Stats()
			builds := uint64(0)
			for _, w := range st.Workers {
				builds += w.Cache.Builds
				switch {
				case w.Jobs == 0 && w.Cache.Builds != 0:
					t.Errorf("worker %d ran no job and built %d items", w.Index, w.Cache.Builds)
				case w.Jobs > 0 && len(plan.IndexItems) == 0 && w.Cache.Builds != 1:
					t.Errorf("worker %d ran %d placement jobs and built %d items, want the configuration once", w.Index, w.Jobs, w.Cache.Builds)
				case w.Jobs > 0 && (w.Cache.Builds < 1 || w.Cache.Builds > uint64(len(plan.IndexItems))+1):
					t.Errorf("worker %d ran %d jobs and built %d items, want the configuration once and at most %d indexes", w.Index, w.Jobs, w.Cache.Builds, len(plan.IndexItems))
				}
				if w.Cache.Resident != 0 || w.Cache.Evictions != w.Cache.Builds {
					t.Errorf("worker %d at the end: %+v", w.Index, w.Cache)
				}
			}
			if builds == 0 {
				t.Error("no worker built anything")
			}
		})
	}
}

// TestConfigItemFreed runs a job after the whole plan on the same worker:
// by then the worker has freed the configuration and every index, because no
// unfinished job needs them.
func TestConfigItemFreed(t *testing.T) {
	for _, workers := range []int{1, 0} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			p := engine.New(engine.Workers(workers))
			plan, err := Queue(p, scaffold.Default().Scaled(0.002), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			keys := []uint64{plan.ConfigItem.Key()}
			names := []string{plan.ConfigItem.Name()}
			for _, it := range plan.IndexItems {
				keys = append(keys, it.Key())
				names = append(names, it.Name())
			}
			after := engine.Queue(p, resident, keys, engine.After(allJobs(plan)...))
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			has, err := after.Result()
			if err != nil {
				t.Fatal(err)
			}
			for i, h := range has {
				if h {
					t.Errorf("after the plan, the worker still holds %s", names[i])
				}
			}
			w := p.Stats().Workers[0]
			if w.Evicted != uint64(len(keys)) || w.Cache.Builds != uint64(len(keys)) {
				t.Errorf("worker built %d items and evicted %d while the pool ran, want %d and %d", w.Cache.Builds, w.Evicted, len(keys), len(keys))
			}
		})
	}
}

// TestConfigFile checks the configuration file: private, named in the jobs'
// arguments, and gone when Run returns, whatever the jobs' outcome.
func TestConfigFile(t *testing.T) {
	cfg := scaffold.Default().Scaled(0.002)
	tests := []struct {
		name      string
		workers   int
		opts      []engine.Option
		interrupt bool                                          // cancel the pool's context once a job succeeded
		setup     func(t *testing.T, out string, ref configRef) // after Queue, before Run
		wantErr   string                                        // in Run's error; "" for none
		leaves    bool                                          // the file cannot be removed (and Run says so)
	}{
		{name: "succeeded/workers=2", workers: 2},
		{name: "succeeded/workers=0", workers: 0},
		{
			name: "failed/workers=2", workers: 2,
			setup:   blockPlacement,
			wantErr: "placement",
		},
		{
			name: "failed/workers=0", workers: 0,
			setup:   blockPlacement,
			wantErr: "placement",
		},
		{
			name: "fail-fast/workers=2", workers: 2, opts: []engine.Option{engine.FailFast()},
			setup:   blockPlacement,
			wantErr: "placement",
		},
		{name: "interrupted/workers=2", workers: 2, interrupt: true, wantErr: context.Canceled.Error()},
		{name: "interrupted/workers=0", workers: 0, interrupt: true, wantErr: context.Canceled.Error()},
		{
			name: "changed/workers=2", workers: 2,
			setup: func(t *testing.T, out string, ref configRef) {
				other := *cfg
				other.Seed++
				b, err := json.Marshal(&other)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(ref.File, b, 0o600); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: errConfigChanged.Error(),
		},
		{
			// The file cannot be removed: Run reports it, so Run waited
			// for the removal.
			name: "unremovable/workers=2", workers: 2,
			setup: func(t *testing.T, out string, ref configRef) {
				if err := os.Remove(ref.File); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(ref.File+"/x", 0o700); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: "removing the configuration file",
			leaves:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			opts := append([]engine.Option{engine.Workers(tt.workers)}, tt.opts...)
			if tt.interrupt {
				opts = append(opts, engine.OnEvent(func(e engine.Event) {
					if e.Kind == engine.JobStatus && e.New == engine.Succeeded {
						cancel()
					}
				}))
			}
			p := engine.New(opts...)
			plan, err := Queue(p, cfg, out)
			if err != nil {
				t.Fatal(err)
			}
			checkFile(t, out, plan.ref)
			if tt.setup != nil {
				tt.setup(t, out, plan.ref)
			}
			err = p.Run(ctx)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Run: %v, want an error with %q", err, tt.wantErr)
			}
			if tt.leaves {
				return
			}
			if names := leftovers(t, out); len(names) > 0 {
				t.Errorf("after Run, %s holds %q", out, names)
			}
			if err := plan.Close(); err != nil {
				t.Errorf("Close after Run: %v", err)
			}
		})
	}
}

// blockPlacement makes every placement job fail: the placement folder is a
// file.
func blockPlacement(t *testing.T, out string, _ configRef) {
	if err := os.WriteFile(out+"/placement", nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// checkFile checks the file ref names: in out, private, holding the
// configuration.
func checkFile(t *testing.T, out string, ref configRef) {
	t.Helper()
	if names := leftovers(t, out); len(names) != 1 || out+"/"+names[0] != ref.File {
		t.Fatalf("after Queue, %s holds %q; the plan's file is %s", out, names, ref.File)
	}
	fi, err := os.Stat(ref.File)
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode(); m != 0o600 {
		t.Errorf("%s has mode %v, want -rw-------", ref.File, m)
	}
	b, err := os.ReadFile(ref.File)
	if err != nil {
		t.Fatal(err)
	}
	var cfg scaffold.Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Hash() != ref.Hash {
		t.Errorf("%s holds configuration %016x, the ref says %016x", ref.File, cfg.Hash(), ref.Hash)
	}
}

// TestCloseWithoutRun: a plan whose pool never runs leaves no file after
// Close, and Close can be called again.
func TestCloseWithoutRun(t *testing.T) {
	out := t.TempDir()
	p := engine.New(engine.Workers(0))
	plan, err := Queue(p, scaffold.Default().Scaled(0.002), out)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, out, plan.ref)
	for range 2 {
		if err := plan.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if names := leftovers(t, out); len(names) > 0 {
		t.Errorf("after Close, %s holds %q", out, names)
	}
}

// TestQueueInvalid: an invalid configuration is refused before any file is
// written or job queued.
func TestQueueInvalid(t *testing.T) {
	out := t.TempDir()
	cfg := scaffold.Default().Scaled(0.002)
	cfg.CellTypes[0].Density = -1
	p := engine.New(engine.Workers(0))
	if _, err := Queue(p, cfg, out); err == nil {
		t.Fatal("Queue accepted a negative density")
	} else if ce := new(scaffold.ConfigError); !errors.As(err, &ce) {
		t.Errorf("Queue: %v, want a *scaffold.ConfigError", err)
	}
	if names := leftovers(t, out); len(names) > 0 {
		t.Errorf("after Queue failed, %s holds %q", out, names)
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := p.Stats().Total().Jobs; n != 0 {
		t.Errorf("%d jobs ran", n)
	}
}
