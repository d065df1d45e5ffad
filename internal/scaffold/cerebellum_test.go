package scaffold

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// cerebellumFile is the example configuration with phases of cache items.
var cerebellumFile = filepath.Join("..", "..", "examples", "scaffold-cerebellum.yaml")

// loadCerebellum parses and validates the example with the package's loader.
func loadCerebellum(t *testing.T) *Config {
	t.Helper()
	data, err := os.ReadFile(cerebellumFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(cerebellumFile, data)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// phase is the span of rules, in configuration order, whose connectivity
// jobs need the index of one source type.
type phase struct {
	source      string
	first, last int // indexes in Config.Rules
}

// phases returns the phase of every source type, in the order the phases
// start. The scaffold's connectivity jobs are queued by rule, and the pool
// dispatches ready jobs in about the order they were queued (oldest first,
// within a bounded look-ahead), so rule order is the order in which the
// indexes are needed.
func phases(cfg *Config) []phase {
	var out []phase
	at := map[string]int{}
	for i, r := range cfg.Rules {
		if k, ok := at[r.From]; ok {
			out[k].last = i
			continue
		}
		at[r.From] = len(out)
		out = append(out, phase{source: r.From, first: i, last: i})
	}
	return out
}

// TestCerebellumExample checks the example's shape: enough cell types and
// rules, and every source index needed during one phase of the run, the
// phases one after the other.
func TestCerebellumExample(t *testing.T) {
	cfg := loadCerebellum(t)
	if n := len(cfg.CellTypes); n < 8 {
		t.Errorf("%d cell types, want at least 8", n)
	}
	if n := len(cfg.Rules); n < 12 {
		t.Errorf("%d connection rules, want at least 12", n)
	}
	ps := phases(cfg)
	if got, want := len(ps), len(cfg.SourceTypes()); got != want {
		t.Fatalf("%d phases for %d source types", got, want)
	}
	if len(ps) < 4 {
		t.Errorf("%d phases, want at least 4", len(ps))
	}
	for i, p := range ps {
		// Contiguous: no rule of another source inside the phase.
		if n := len(cfg.RulesFrom(p.source)); n != p.last-p.first+1 {
			t.Errorf("the %d rules from %s are not together: they span rules %d to %d", n, p.source, p.first, p.last)
		}
		if i > 0 && p.first <= ps[i-1].last {
			t.Errorf("phase of %s (rules %d-%d) overlaps that of %s (rules %d-%d)",
				p.source, p.first, p.last, ps[i-1].source, ps[i-1].first, ps[i-1].last)
		}
	}
}

// TestCerebellumPhasesFreeMemory builds every source index of the example at
// a small scale and checks what freeing stale indexes buys: a worker that
// frees each index after its phase holds one index, or two while one phase
// hands over to the next (the stale rule keeps the previous phase's index
// until its last job has finished on any worker). That must be at most half
// of what a worker that keeps everything ends up holding. At full scale, at
// least three indexes are large.
func TestCerebellumPhasesFreeMemory(t *testing.T) {
	cfg := loadCerebellum(t)

	// Full scale, without placing anything: 16 bytes per cell (position and
	// id) is a lower bound of an index's memory.
	const mib = 1 << 20
	var large []string
	for _, typ := range cfg.SourceTypes() {
		n, err := cfg.cells(typ)
		if err != nil {
			t.Fatal(err)
		}
		if 16*n >= 10*mib {
			large = append(large, typ)
		}
	}
	if len(large) < 3 {
		t.Errorf("at scale 1, only %q have an index of 10 MiB or more, want at least 3", large)
	}

	small := cfg.Scaled(0.01)
	dir := t.TempDir()
	bytes := map[string]int64{}
	for _, typ := range small.SourceTypes() {
		for _, ch := range small.Chunks() {
			if _, err := Place(small, typ, ch, dir); err != nil {
				t.Fatal(err)
			}
		}
		ix, err := BuildIndex(small, typ, dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		bytes[typ] = ix.Bytes()
	}
	var keepAll, freeStale int64
	ps := phases(small)
	for i, p := range ps {
		keepAll += bytes[p.source]
		held := bytes[p.source]
		if i > 0 {
			held += bytes[ps[i-1].source]
		}
		freeStale = max(freeStale, held)
	}
	for _, p := range ps {
		t.Logf("rules %2d-%2d from %-16s index %8.1f KiB", p.first, p.last, p.source, float64(bytes[p.source])/1024)
	}
	t.Logf("at scale 0.01: keeping every index %.1f KiB, freeing stale ones at most %.1f KiB (%.2f)",
		float64(keepAll)/1024, float64(freeStale)/1024, float64(freeStale)/float64(keepAll))
	if 2*freeStale > keepAll {
		t.Errorf("freeing stale indexes holds up to %d bytes, more than half of keeping them all (%d)", freeStale, keepAll)
	}
	sizes := make([]int64, 0, len(bytes))
	for _, b := range bytes {
		sizes = append(sizes, b)
	}
	slices.Sort(sizes)
	if lo, hi := sizes[0], sizes[len(sizes)-1]; hi < 10*lo {
		t.Errorf("the indexes hold %d to %d bytes, want sizes that differ tenfold or more", lo, hi)
	}
}
