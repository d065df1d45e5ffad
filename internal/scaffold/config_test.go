package scaffold

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/regfile"
)

// base is a valid configuration whose line numbers the error cases rely on.
const base = `seed: 7
box:
  size: [100, 100, 50]
  chunk: 50
cell_types:
  - name: a
    density: 1e5
  - name: b
    density: 2e5
    radius: 3
connections:
  - name: a_to_b
    from: a
    to: b
    max_distance: 20
    max_per_target: 3
`

func TestParseBase(t *testing.T) {
	c, err := ParseConfig("t.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Seed: 7,
		Box:  Box{Size: [3]float64{100, 100, 50}, Chunk: [3]float64{50, 50, 50}},
		CellTypes: []CellType{
			{Name: "a", Density: 1e5},
			{Name: "b", Density: 2e5, Radius: 3},
		},
		Rules: []Rule{{Name: "a_to_b", From: "a", To: "b", MaxDistance: 20, MaxPerTarget: 3}},
	}
	if fmt.Sprintf("%+v", c) != fmt.Sprintf("%+v", want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
	if c.Hash() != want.Hash() {
		t.Errorf("Hash differs between equal configurations")
	}
	if got := c.grid(); got != [3]int{2, 2, 1} {
		t.Errorf("Grid() = %v, want [2 2 1]", got)
	}
}

func TestParseAliasesAndEmptyRules(t *testing.T) {
	src := strings.Replace(base, "density: 1e5", "density: &d 2e5", 1)
	src = strings.Replace(src, "density: 2e5", "density: *d", 1)
	src = src[:strings.Index(src, "connections:")] + "connections:\n"
	c, err := ParseConfig("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if c.CellTypes[0].Density != 2e5 || c.CellTypes[1].Density != 2e5 || len(c.Rules) != 0 {
		t.Errorf("got %+v", c)
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name     string
		old, new string // replace old by new in base ("" old: append new)
		want     []string
	}{
		{"unknown top-level field", "", "colour: red\n", []string{`t.yaml:17: unknown field "colour"`}},
		{"unknown cell type field", "    radius: 3\n", "    radius: 3\n    colour: red\n",
			[]string{`t.yaml:11: cell_types[1]: unknown field "colour" (want name, density, radius)`}},
		{"misspelled field", "density: 1e5", "densty: 1e5",
			[]string{`t.yaml:7: cell_types[0]: unknown field "densty"`, `t.yaml:6: cell_types[0]: missing required field "density"`}},
		{"duplicate cell type", "name: b", "name: a", []string{`t.yaml:8: cell type "a" is defined twice`}},
		{"unknown from type", "from: a", "from: c",
			[]string{`t.yaml:13: connection "a_to_b": from: unknown cell type "c" (known: a, b)`}},
		{"unknown to type", "to: b", "to: granule", []string{`t.yaml:14: connection "a_to_b": to: unknown cell type "granule"`}},
		{"negative density", "density: 2e5", "density: -2e5", []string{`t.yaml:9: cell type "b": density must be a positive number`}},
		{"zero density", "density: 1e5", "density: 0", []string{`t.yaml:7: cell type "a": density must be a positive`}},
		{"NaN density", "density: 1e5", "density: .nan", []string{`t.yaml:7: cell type "a": density must be a positive`}},
		{"density not a number", "density: 1e5", "density: lots", []string{`t.yaml:7: cell_types[0].density: want a number, got "lots"`}},
		{"density missing value", "density: 1e5", "density:", []string{`t.yaml:7: cell_types[0].density: value missing`}},
		{"negative radius", "radius: 3", "radius: -1", []string{`t.yaml:10: cell type "b": radius must be a non-negative`}},
		{"zero box size", "size: [100, 100, 50]", "size: [100, 0, 50]", []string{`t.yaml:3: box.size: y must be a positive number`}},
		{"two numbers for size", "size: [100, 100, 50]", "size: [100, 100]", []string{`t.yaml:3: box.size: want a list of three numbers`}},
		{"chunk does not divide", "chunk: 50", "chunk: 30", []string{`t.yaml:4: box.chunk: x = 30 µm does not divide box.size x = 100 µm`}},
		{"chunk larger than box", "chunk: 50", "chunk: [50, 50, 60]", []string{`t.yaml:4: box.chunk: z = 60 µm is larger than box.size z = 50 µm`}},
		{"too many chunks", "chunk: 50", "chunk: 0.5", []string{`t.yaml:4: box.chunk: 4000000 chunks is more than the limit of 65536`}},
		{"missing box", "box:\n  size: [100, 100, 50]\n  chunk: 50\n", "", []string{`t.yaml:1: configuration: missing required field "box"`}},
		{"bad rule name", "name: a_to_b", "name: a/b", []string{`t.yaml:12: connection name "a/b" is not valid`}},
		{"number as name", "name: b", "name: 12", []string{`t.yaml:8: cell_types[1].name: want a name, got !!int "12"`}},
		{"duplicate rule", "", "  - name: a_to_b\n    from: b\n    to: a\n    max_distance: 5\n",
			[]string{`t.yaml:17: connection "a_to_b" is defined twice`}},
		{"zero max_per_target", "max_per_target: 3", "max_per_target: 0",
			[]string{`t.yaml:16: connections[0].max_per_target: want a positive integer, got 0`}},
		{"fractional max_per_target", "max_per_target: 3", "max_per_target: 2.5",
			[]string{`t.yaml:16: connections[0].max_per_target: want a positive integer, got "2.5"`}},
		{"probability above 1", "", "    probability: 1.5\n", []string{`t.yaml:17: connections[0].probability: want a number in (0, 1], got 1.5`}},
		{"zero probability", "", "    probability: 0\n", []string{`t.yaml:17: connections[0].probability: want a number in (0, 1], got 0`}},
		{"missing max_distance", "    max_distance: 20\n", "", []string{`t.yaml:12: connections[0]: missing required field "max_distance"`}},
		{"repeated key", "    to: b\n", "    to: b\n    to: a\n", []string{`t.yaml:15: connections[0]: field "to" repeated (first at line 14)`}},
		{"negative seed", "seed: 7", "seed: -1", []string{`t.yaml:1: seed: want a non-negative integer, got "-1"`}},
		{"cell types not a list", "cell_types:\n", "cell_types: 3\nxcell_types:\n", []string{`t.yaml:5: cell_types: want a list`}},
		// yaml.v3 reports some syntax errors a line early (go-yaml/yaml#205):
		// the line is not pinned here.
		{"YAML syntax", "  chunk: 50\n", "  chunk: [50\n", []string{`: invalid YAML: did not find expected ',' or ']'`}},
		{"second document", "", "---\nseed: 1\n", []string{`t.yaml:17: a second YAML document`}},
		{"unknown anchor", "", "  - *nope\n", []string{`t.yaml:17: invalid YAML: unknown anchor 'nope' referenced`}},
		{"unknown anchor on the first line", "seed: 7", "seed: *seed", []string{`t.yaml:1: invalid YAML: unknown anchor 'seed' referenced`}},
		{"alias repeats a cell type", "  - name: b\n", "  - &c {name: c, density: 1}\n  - *c\n  - name: b\n",
			[]string{`t.yaml:9: cell_types[2]: an alias repeats cell_types[1] (line 8), and so its name`}},
		{"more than 20 problems", "", strings.Repeat("  - {name: r, from: x, to: a, max_distance: 1}\n", 25),
			[]string{`t.yaml:17: connection "r": from: unknown cell type "x" (known: a, b)`, "\n... and 29 more"}},
		{"empty", base, "", []string{`t.yaml:1: empty configuration`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := base + tt.new
			if tt.old != "" {
				if !strings.Contains(base, tt.old) {
					t.Fatalf("%q not in base", tt.old)
				}
				src = strings.Replace(base, tt.old, tt.new, 1)
			}
			c, err := ParseConfig("t.yaml", []byte(src))
			if err == nil {
				t.Fatalf("no error; got %+v", c)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain\n%s", err, w)
				}
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.File != "t.yaml" || ce.Line == 0 || !strings.HasPrefix(err.Error(), fmt.Sprintf("t.yaml:%d: ", ce.Line)) {
				t.Errorf("errors.As(*ConfigError) = %+v, want one with File and Line", ce)
			}
		})
	}
}

func TestParseConfigLimitsErrors(t *testing.T) {
	var b strings.Builder
	b.WriteString(base)
	for i := range 30 {
		fmt.Fprintf(&b, "extra%d: 1\n", i)
	}
	_, err := ParseConfig("t.yaml", []byte(b.String()))
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 21 || lines[20] != "... and 10 more" || !strings.HasPrefix(lines[0], `t.yaml:17: unknown field "extra0"`) {
		t.Errorf("got %d lines:\n%v", len(lines), err)
	}
}

func TestValidate(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("default: %v", err)
	}
	c.CellTypes[0].Density = -1
	c.Rules[0].From = "nobody"
	err := c.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{`cell type "granule": density must be`, `from: unknown cell type "nobody"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.File != "" || strings.Contains(ce.Error(), ":0:") {
		t.Errorf("got %#v", ce)
	}
}

func TestDefaultConfig(t *testing.T) {
	c, err := ParseConfig(defaultConfigName, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if c.Hash() != Default().Hash() {
		t.Error("Default() differs from parsing DefaultConfig()")
	}
	// DefaultConfig returns a copy.
	b := DefaultConfig()
	clear(b)
	if _, err := ParseConfig("again", DefaultConfig()); err != nil {
		t.Errorf("after clearing a copy: %v", err)
	}

	// The shape the command's demonstration relies on.
	if n := len(c.Chunks()); n < 8 || n > 30 {
		t.Errorf("%d chunks, want 8 to 30", n)
	}
	if n := len(c.CellTypes); n < 3 {
		t.Errorf("%d cell types, want 3 or more", n)
	}
	if n := len(c.Rules); n < 3 || n > 5 {
		t.Errorf("%d rules, want 3 to 5", n)
	}
	shared := 0
	for _, typ := range c.SourceTypes() {
		if len(c.RulesFrom(typ)) >= 2 {
			shared++
		}
	}
	if shared < 2 {
		t.Errorf("%d source types used by two rules or more, want 2 or more", shared)
	}
	for _, typ := range []string{"granule", "glomerulus"} {
		n, err := c.cells(typ)
		if err != nil || n < 500_000 {
			t.Errorf("Cells(%s) = %d, %v; want an index of tens of MB", typ, n, err)
		}
	}
}

func TestChunks(t *testing.T) {
	c := Default()
	chunks := c.Chunks()
	g := c.grid()
	if len(chunks) != g[0]*g[1]*g[2] {
		t.Fatalf("%d chunks for grid %v", len(chunks), g)
	}
	seen := map[[3]int]bool{}
	for i, ch := range chunks {
		if ch.Index != i {
			t.Errorf("chunk %d has Index %d", i, ch.Index)
		}
		if i > 0 {
			p := chunks[i-1]
			if [3]int{ch.Z, ch.Y, ch.X} == [3]int{p.Z, p.Y, p.X} || ch.Z < p.Z || ch.Z == p.Z && (ch.Y < p.Y || ch.Y == p.Y && ch.X < p.X) {
				t.Errorf("chunk %v after %v: want x fastest, then y, then z", ch, p)
			}
		}
		seen[[3]int{ch.X, ch.Y, ch.Z}] = true
		lo, hi := c.chunkBounds(ch)
		for d := range 3 {
			if hi[d]-lo[d] != c.Box.Chunk[d] || lo[d] < 0 || hi[d] > c.Box.Size[d]*(1+1e-12) {
				t.Errorf("chunk %v bounds %v..%v outside box %v", ch, lo, hi, c.Box.Size)
			}
		}
	}
	if len(seen) != len(chunks) {
		t.Errorf("%d distinct chunks of %d", len(seen), len(chunks))
	}
	if got := chunks[5].String(); got != fmt.Sprintf("%d-%d-%d", chunks[5].X, chunks[5].Y, chunks[5].Z) {
		t.Errorf("String() = %q", got)
	}
}

func TestScaled(t *testing.T) {
	c := Default()
	if c.Scaled(1).Hash() != c.Hash() {
		t.Error("Scaled(1) differs from the original")
	}
	vol := func(c *Config) float64 { return c.Box.Size[0] * c.Box.Size[1] * c.Box.Size[2] }
	for _, f := range []float64{0.05, 0.1, 2} {
		s := c.Scaled(f)
		if err := s.Validate(); err != nil {
			t.Errorf("Scaled(%g): %v", f, err)
		}
		if r := vol(s) / vol(c); math.Abs(r-f) > 1e-9*f {
			t.Errorf("Scaled(%g): volume ratio %g", f, r)
		}
		if s.grid() != c.grid() {
			t.Errorf("Scaled(%g): grid %v, want %v", f, s.grid(), c.grid())
		}
		if s.Hash() == c.Hash() {
			t.Errorf("Scaled(%g) has the original's hash", f)
		}
		n0, _ := c.cells("granule")
		n, _ := s.cells("granule")
		if r := float64(n) / float64(n0); math.Abs(r-f) > 0.01*f {
			t.Errorf("Scaled(%g): %d granule cells, %g times the original's", f, n, r)
		}
	}
	// The copy is deep.
	s := c.Scaled(2)
	s.CellTypes[0].Density = 1
	s.Rules[0].MaxDistance = 1
	if c.CellTypes[0].Density == 1 || c.Rules[0].MaxDistance == 1 {
		t.Error("Scaled shares slices with the original")
	}
	for _, f := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "scaffold: Scaled:") {
					t.Errorf("Scaled(%v): recovered %v, want a scaffold panic", f, r)
				}
			}()
			c.Scaled(f)
		}()
	}
}

func TestHashSensitivity(t *testing.T) {
	c := Default()
	h := c.Hash()
	changes := map[string]func(c *Config){
		"seed":         func(c *Config) { c.Seed++ },
		"size":         func(c *Config) { c.Box.Size[2] *= 2 },
		"density":      func(c *Config) { c.CellTypes[1].Density *= 1.0001 },
		"radius":       func(c *Config) { c.CellTypes[0].Radius++ },
		"rule":         func(c *Config) { c.Rules[2].MaxPerTarget++ },
		"probability":  func(c *Config) { c.Rules[0].Probability = 0.5 },
		"rule removed": func(c *Config) { c.Rules = c.Rules[1:] },
	}
	for name, change := range changes {
		d := c.Scaled(1)
		change(d)
		if d.Hash() == h {
			t.Errorf("changing the %s keeps the hash", name)
		}
	}
}

func TestLookups(t *testing.T) {
	c := Default()
	if _, err := c.cellType("nobody"); !errors.Is(err, errUnknownType) {
		t.Errorf("CellType(nobody): %v", err)
	}
	if _, err := c.Rule("nothing"); !errors.Is(err, errUnknownRule) {
		t.Errorf("Rule(nothing): %v", err)
	}
	if _, err := c.count("granule", Chunk{Index: 1}); !errors.Is(err, errBadChunk) {
		t.Errorf("Count with a bad chunk: %v", err)
	}
	if got := c.indexCellSize("glomerulus"); got != 20 {
		t.Errorf("IndexCellSize(glomerulus) = %v, want 20, the smallest distance of its rules", got)
	}
	if got := c.indexCellSize("stellate"); got != 300 {
		t.Errorf("IndexCellSize(stellate) = %v, want the chunk size 300 (no rule)", got)
	}
	var first uint32
	chunks := c.Chunks()
	for _, ch := range chunks {
		id, err := c.firstID("golgi", ch)
		if err != nil || id != first {
			t.Fatalf("FirstID(golgi, %v) = %d, %v; want %d", ch, id, err, first)
		}
		n, _ := c.count("golgi", ch)
		first += uint32(n)
	}
	if total, _ := c.cells("golgi"); total != int(first) {
		t.Errorf("Cells(golgi) = %d, sum of counts %d", total, first)
	}
}

// LoadConfig reads a configuration file, refuses one over MaxConfigSize,
// naming the file, its size and the limit, and what is not a regular file
// at once.
func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(good)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := ParseConfig("t.yaml", []byte(base)); c.Hash() != want.Hash() {
		t.Error("LoadConfig and ParseConfig disagree")
	}
	if _, err := LoadConfig(filepath.Join(dir, "missing.yaml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadConfig(missing) = %v, want fs.ErrNotExist", err)
	}
	over := filepath.Join(dir, "over.yaml")
	if err := os.WriteFile(over, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(over, MaxConfigSize+1); err != nil {
		t.Fatal(err)
	}
	_, err = LoadConfig(over)
	if !errors.Is(err, regfile.ErrTooLarge) {
		t.Errorf("LoadConfig(%s) = %v, want regfile.ErrTooLarge", over, err)
	} else if !strings.HasPrefix(err.Error(), over+": ") || !strings.Contains(err.Error(), "16 MiB") || !strings.Contains(err.Error(), "16777217 bytes") {
		t.Errorf("error %q does not name the file, its size and the limit", err)
	}
	// Not regular files: refused at once (a FIFO that no writer opens
	// too), saying what they are.
	fifo := filepath.Join(dir, "config.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, says := range map[string]string{"/dev/zero": "is a device", fifo: "is a named pipe (FIFO)", dir: "is a directory"} {
		done := make(chan error, 1)
		go func() {
			_, err := LoadConfig(path)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, regfile.ErrNotRegular) || err.Error() != path+": "+says+", not a regular file" {
				t.Errorf("LoadConfig(%s) = %v; want it refused: %s", path, err, says)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("LoadConfig(%s) did not return within 10s", path)
		}
	}
}
