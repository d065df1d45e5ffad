package scaffold

import (
	"errors"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// tiny is the scale of the end-to-end test: a run takes about a second, or
// less under the race detector.
func tiny() float64 {
	if raceEnabled {
		return 0.01
	}
	return 0.05
}

// TestEndToEnd runs the default workload at a tiny scale and checks what it
// wrote against the configuration and the rules.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	cfg := Default().Scaled(tiny())
	dir := t.TempDir()
	st := runAll(t, cfg, dir, nil)

	sum, err := Summary(cfg, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("summary:\n%s", sum)
	for i, typ := range cfg.CellTypes {
		want, _ := cfg.cells(typ.Name)
		if got := sum.Cells[i]; got.Name != typ.Name || got.N != int64(want) || want == 0 {
			t.Errorf("Summary cells %+v, want %s %d (non-zero)", got, typ.Name, want)
		}
	}
	for i, r := range cfg.Rules {
		if got := sum.Connections[i]; got.Name != r.Name || got.N != int64(st.conns[r.Name]) || got.N == 0 {
			t.Errorf("Summary connections %+v, want %s %d (non-zero, as Connect returned)", got, r.Name, st.conns[r.Name])
		}
	}
	if st.placeJobs != len(cfg.CellTypes)*len(cfg.Chunks()) {
		t.Errorf("%d placement jobs", st.placeJobs)
	}

	// Every connection obeys its rule.
	pos := map[string][][3]float32{} // all positions of a type, by global id
	for _, typ := range cfg.CellTypes {
		for _, ch := range cfg.Chunks() {
			p, err := readPositions(cfg, typ.Name, ch, dir)
			if err != nil {
				t.Fatal(err)
			}
			lo, hi := cfg.chunkBounds(ch)
			for _, q := range p {
				for d := range 3 {
					if float64(q[d]) < lo[d] || float64(q[d]) > hi[d] {
						t.Fatalf("%s cell at %v outside chunk %v (%v..%v)", typ.Name, q, ch, lo, hi)
					}
				}
			}
			pos[typ.Name] = append(pos[typ.Name], p...)
		}
	}
	for _, r := range cfg.Rules {
		perTarget := make([]int, len(pos[r.To]))
		for _, ch := range cfg.Chunks() {
			pairs, err := readConnections(cfg, r.Name, ch, dir)
			if err != nil {
				t.Fatal(err)
			}
			first, _ := cfg.firstID(r.To, ch)
			n, _ := cfg.count(r.To, ch)
			if !slices.IsSortedFunc(pairs, func(a, b [2]uint32) int {
				if a[1] != b[1] {
					return int(a[1]) - int(b[1])
				}
				return int(a[0]) - int(b[0])
			}) {
				t.Errorf("%s %v: pairs not sorted by target then source", r.Name, ch)
			}
			for i, pr := range pairs {
				s, tg := pr[0], pr[1]
				if i > 0 && pairs[i-1] == pr {
					t.Errorf("%s: pair %v repeated", r.Name, pr)
				}
				if tg < first || tg >= first+uint32(n) {
					t.Fatalf("%s %v: target %d outside the chunk's ids [%d, %d)", r.Name, ch, tg, first, first+uint32(n))
				}
				if int(s) >= len(pos[r.From]) {
					t.Fatalf("%s: source id %d of %d", r.Name, s, len(pos[r.From]))
				}
				if d := dist(pos[r.From][s], pos[r.To][tg]); d > r.MaxDistance*(1+1e-6) {
					t.Errorf("%s: pair %v at distance %g > %g", r.Name, pr, d, r.MaxDistance)
				}
				perTarget[tg]++
			}
		}
		for tg, n := range perTarget {
			if n == 0 {
				continue
			}
			if r.MaxPerTarget > 0 && n > r.MaxPerTarget {
				t.Errorf("%s: target %d has %d sources, more than %d", r.Name, tg, n, r.MaxPerTarget)
			}
		}
	}
	assertNoTemp(t, dir)
}

func dist(a, b [3]float32) float64 {
	var s float64
	for d := range 3 {
		x := float64(a[d]) - float64(b[d])
		s += x * x
	}
	return math.Sqrt(s)
}

// assertNoTemp fails if any temporary file is left under dir.
func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".tmp-") {
			t.Errorf("temporary file left: %s", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDeterminism runs the same tiny workload three ways: in order; shuffled
// with other index grid sizes; and with the jobs of each phase spread over
// goroutines sharing one index. The checksums must agree, and differ for
// another seed.
func TestDeterminism(t *testing.T) {
	t.Parallel()
	cfg := Default().Scaled(tiny() / 5)
	inOrder := t.TempDir()
	runAll(t, cfg, inOrder, nil)
	want := checksum(t, cfg, inOrder)

	seed := rand.Uint64()
	t.Logf("shuffle seed %d", seed)
	shuffled := t.TempDir()
	runAll(t, cfg, shuffled, rand.New(rand.NewPCG(seed, 0)))
	if got := checksum(t, cfg, shuffled); got != want {
		t.Errorf("shuffled run: checksum %016x, in order %016x", got, want)
	}

	concurrent := t.TempDir()
	runConcurrent(t, cfg, concurrent)
	if got := checksum(t, cfg, concurrent); got != want {
		t.Errorf("concurrent run: checksum %016x, in order %016x", got, want)
	}
	// Byte for byte, not only by checksum.
	for _, ch := range cfg.Chunks() {
		for _, r := range cfg.Rules {
			a, _ := os.ReadFile(connectivityPath(inOrder, r.Name, ch))
			b, _ := os.ReadFile(connectivityPath(concurrent, r.Name, ch))
			if !slices.Equal(a, b) {
				t.Errorf("%s %v: files differ", r.Name, ch)
			}
		}
	}

	other := cfg.Scaled(1)
	other.Seed++
	otherDir := t.TempDir()
	runAll(t, other, otherDir, nil)
	if got := checksum(t, other, otherDir); got == want {
		t.Errorf("seed %d and %d give the same checksum %016x", cfg.Seed, other.Seed, got)
	}
	// And the checksum reads the content: one flipped byte changes it.
	path := connectivityPath(inOrder, cfg.Rules[0].Name, cfg.Chunks()[0])
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 30 {
		t.Fatalf("%s: %d bytes, %v", path, len(b), err)
	}
	b[len(b)-1] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := checksum(t, cfg, inOrder); got == want {
		t.Error("checksum unchanged by a changed byte")
	}
}

// runConcurrent runs every job of each phase in its own goroutine, the
// connectivity jobs of all rules sharing the indexes.
func runConcurrent(t *testing.T, cfg *Config, dir string) {
	var wg sync.WaitGroup
	for _, typ := range cfg.CellTypes {
		for _, ch := range cfg.Chunks() {
			wg.Go(func() {
				if _, err := Place(cfg, typ.Name, ch, dir); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	indexes := map[string]*Index{}
	for _, typ := range cfg.SourceTypes() {
		ix, err := BuildIndex(cfg, typ, dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		indexes[typ] = ix
	}
	for _, r := range cfg.Rules {
		for _, ch := range cfg.Chunks() {
			wg.Go(func() {
				if _, err := Connect(cfg, r, ch, indexes[r.From], dir); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
}

func TestAtomicWriteFailure(t *testing.T) {
	t.Parallel()
	cfg := Default().Scaled(0.001)
	dir := t.TempDir()
	ch := cfg.Chunks()[0]
	// A non-empty folder where the file should go: the rename must fail.
	path := placementPath(dir, "golgi", ch)
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Place(cfg, "golgi", ch, dir); err == nil || !strings.Contains(err.Error(), "place golgi in chunk 0-0-0") {
		t.Errorf("Place over a folder: %v, want an error naming the job", err)
	}
	assertNoTemp(t, dir)

	// A file is replaced whole.
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Repeat("old content ", 10000)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Place(cfg, "golgi", ch, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := readPositions(cfg, "golgi", ch, dir); err != nil {
		t.Errorf("after replacing: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("Stat: %v, %v; want mode 0644", fi.Mode(), err)
	}
	assertNoTemp(t, dir)
}

func TestRemoveTemp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if n, err := RemoveTemp(dir); n != 0 || err != nil {
		t.Errorf("empty folder: %d, %v", n, err)
	}
	folder := filepath.Join(dir, "connectivity", "r")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{ // name -> removed
		".0-0-0.bin.tmp-12345": true,
		"0-0-0.bin":            false,
		".hidden":              false,
		"notes.tmp-1":          false,
	}
	for name := range files {
		if err := os.WriteFile(filepath.Join(folder, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := RemoveTemp(dir); n != 1 || err != nil {
		t.Errorf("RemoveTemp = %d, %v; want 1, nil", n, err)
	}
	for name, removed := range files {
		_, err := os.Stat(filepath.Join(folder, name))
		if gone := errors.Is(err, fs.ErrNotExist); gone != removed {
			t.Errorf("%s: removed %v, want %v", name, gone, removed)
		}
	}
}

// TestMisuse checks that what goes wrong between jobs is reported, not
// silently computed on: files of another configuration, a truncated file, a
// missing one, the wrong index, a changed rule, a chunk of another grid.
func TestMisuse(t *testing.T) {
	t.Parallel()
	cfg := Default().Scaled(0.002)
	dir := t.TempDir()
	runAll(t, cfg, dir, nil)
	ch := cfg.Chunks()[1]
	rule := cfg.Rules[0]
	ix, err := BuildIndex(cfg, rule.From, dir, 0)
	if err != nil {
		t.Fatal(err)
	}

	other := cfg.Scaled(1)
	other.Seed++
	if _, err := BuildIndex(other, rule.From, dir, 0); !errors.Is(err, errBadFile) || !strings.Contains(err.Error(), "not this one") {
		t.Errorf("BuildIndex over another configuration's files: %v", err)
	}
	if _, err := Connect(other, rule, ch, ix, dir); !errors.Is(err, errWrongIndex) {
		t.Errorf("Connect with an index of another configuration: %v", err)
	}
	if _, err := Checksum(other, dir); !errors.Is(err, errBadFile) {
		t.Errorf("Checksum of another configuration: %v", err)
	}
	wrong, err := BuildIndex(cfg, rule.To, dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Connect(cfg, rule, ch, wrong, dir); !errors.Is(err, errWrongIndex) {
		t.Errorf("Connect with the target's index: %v", err)
	}
	if _, err := Connect(cfg, rule, ch, nil, dir); !errors.Is(err, errWrongIndex) {
		t.Errorf("Connect with a nil index: %v", err)
	}
	changed := rule
	changed.MaxDistance++
	if _, err := Connect(cfg, changed, ch, ix, dir); !errors.Is(err, errUnknownRule) {
		t.Errorf("Connect with a changed rule: %v", err)
	}
	if _, err := Place(cfg, "granule", Chunk{Index: 0, X: 99}, dir); !errors.Is(err, errBadChunk) {
		t.Errorf("Place in a chunk outside the grid: %v", err)
	}
	if _, err := Place(cfg, "purkinje", ch, dir); !errors.Is(err, errUnknownType) {
		t.Errorf("Place of an unknown type: %v", err)
	}
	invalid := cfg.Scaled(1)
	invalid.Box.Chunk[0] = 0
	if _, err := Place(invalid, "granule", ch, dir); err == nil || !strings.Contains(err.Error(), "invalid configuration") {
		t.Errorf("Place with an invalid configuration: %v", err)
	}

	// A truncated placement file.
	path := placementPath(dir, rule.To, ch)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b[:len(b)-5], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Connect(cfg, rule, ch, ix, dir); !errors.Is(err, errBadFile) {
		t.Errorf("Connect over a truncated file: %v", err)
	}
	if _, err := Summary(cfg, dir); !errors.Is(err, errBadFile) {
		t.Errorf("Summary over a truncated file: %v", err)
	}
	// A connectivity file that is not one.
	if err := os.WriteFile(connectivityPath(dir, rule.Name, ch), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readConnections(cfg, rule.Name, ch, dir); !errors.Is(err, errBadFile) || !strings.Contains(err.Error(), "magic") {
		t.Errorf("ReadConnections of a placement file: %v", err)
	}
	// A missing one.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := BuildIndex(cfg, rule.To, dir, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("BuildIndex with a missing file: %v", err)
	}
}
