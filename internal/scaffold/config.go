package scaffold

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
)

//go:embed default.yaml
var defaultYAML []byte

// maxChunks is the largest number of chunks a configuration may cut its box
// into. Every chunk is a job and a file per cell type and per rule.
const maxChunks = 1 << 16

// maxCellsPerType is the largest number of cells of one type a configuration
// may ask for: global ids are uint32.
const maxCellsPerType = math.MaxUint32 - maxChunks

// Config is a scaffold configuration: a box cut into chunks, cell types placed
// uniformly at a density, and rules that connect cells of one type to cells of
// another within a distance.
//
// Lengths are in micrometres (µm); densities in cells per cubic millimetre
// (1 mm³ = 10⁹ µm³). The box spans [0, Size) on each axis.
//
// Obtain a Config from [ParseConfig], [Default] or [Config.Scaled]; one built
// or changed by hand should pass [Config.Validate] first. All methods only read
// the Config, so one Config may be shared by any number of goroutines as long
// as nobody changes it.
type Config struct {
	Seed      uint64     // the seed every random stream derives from
	Box       Box        // the volume and how it is cut
	CellTypes []CellType // placed in this order; never empty
	Rules     []Rule     // connection rules, in this order; may be empty
}

// Box is the volume the cells fill and its grid of chunks.
type Box struct {
	Size  [3]float64 // extent along x, y, z in µm; all positive
	Chunk [3]float64 // chunk extent along x, y, z in µm; divides Size exactly
}

// CellType is one kind of cell.
type CellType struct {
	Name    string  // unique among cell types; letters, digits, '_', '-'
	Density float64 // cells per mm³; positive
	Radius  float64 // soma radius in µm; 0 if not given. Informative only: cells may overlap.
}

// Rule connects cells of type From (sources) to cells of type To (targets).
//
// For each target cell, the candidates are the source cells within
// MaxDistance of it (the cell itself excluded when From == To), in increasing
// global id. Each candidate is then kept with probability Probability, and of
// those kept at most MaxPerTarget are chosen uniformly at random.
type Rule struct {
	Name         string  // unique among rules; letters, digits, '_', '-'
	From         string  // source cell type
	To           string  // target cell type
	MaxDistance  float64 // µm; positive
	MaxPerTarget int     // 0 means no limit
	Probability  float64 // in (0, 1]; 0 means 1 (keep every candidate)
}

// Chunk is one cell of the box's grid of chunks. Index is its position in
// [Config.Chunks]; X, Y and Z its grid coordinates.
type Chunk struct {
	Index   int
	X, Y, Z int
}

// String returns "X-Y-Z", the base name of the chunk's output files.
func (ch Chunk) String() string { return fmt.Sprintf("%d-%d-%d", ch.X, ch.Y, ch.Z) }

// DefaultConfig returns a copy of the embedded default configuration, as YAML.
func DefaultConfig() []byte { return slices.Clone(defaultYAML) }

// defaultConfigName is the file name errors in the embedded configuration would
// carry.
const defaultConfigName = "default.yaml"

// Default returns the embedded default configuration, parsed. It panics if the
// embedded file is invalid, which the package's tests rule out.
func Default() *Config {
	c, err := ParseConfig(defaultConfigName, defaultYAML)
	if err != nil {
		panic("scaffold: embedded default configuration: " + err.Error())
	}
	return c
}

// grid returns the number of chunks along x, y and z.
func (c *Config) grid() [3]int {
	var n [3]int
	for d := range 3 {
		n[d] = int(math.Round(c.Box.Size[d] / c.Box.Chunk[d]))
	}
	return n
}

// Chunks returns every chunk of the box, x varying fastest, then y, then z.
// The order is stable: it fixes global ids and the checksum.
func (c *Config) Chunks() []Chunk {
	n := c.grid()
	out := make([]Chunk, 0, n[0]*n[1]*n[2])
	for z := range n[2] {
		for y := range n[1] {
			for x := range n[0] {
				out = append(out, Chunk{Index: len(out), X: x, Y: y, Z: z})
			}
		}
	}
	return out
}

// chunkBounds returns the lower and upper corners of ch in µm.
func (c *Config) chunkBounds(ch Chunk) (lo, hi [3]float64) {
	xyz := [3]int{ch.X, ch.Y, ch.Z}
	for d := range 3 {
		lo[d] = float64(xyz[d]) * c.Box.Chunk[d]
		hi[d] = float64(xyz[d]+1) * c.Box.Chunk[d]
	}
	return lo, hi
}

// checkChunk reports whether ch is one of c.Chunks().
func (c *Config) checkChunk(ch Chunk) error {
	n := c.grid()
	if ch.X < 0 || ch.Y < 0 || ch.Z < 0 || ch.X >= n[0] || ch.Y >= n[1] || ch.Z >= n[2] ||
		ch.Index != (ch.Z*n[1]+ch.Y)*n[0]+ch.X {
		return fmt.Errorf("%w: %+v (grid %d×%d×%d)", errBadChunk, ch, n[0], n[1], n[2])
	}
	return nil
}

// cellType returns the cell type called name.
func (c *Config) cellType(name string) (CellType, error) {
	for _, t := range c.CellTypes {
		if t.Name == name {
			return t, nil
		}
	}
	return CellType{}, fmt.Errorf("%w %q", errUnknownType, name)
}

// Rule returns the connection rule called name.
func (c *Config) Rule(name string) (Rule, error) {
	for _, r := range c.Rules {
		if r.Name == name {
			return r, nil
		}
	}
	return Rule{}, fmt.Errorf("%w %q", errUnknownRule, name)
}

// RulesFrom returns the rules whose source type is cellType, in configuration
// order: the rules whose [Connect] jobs need the [Index] of cellType.
func (c *Config) RulesFrom(cellType string) []Rule {
	var out []Rule
	for _, r := range c.Rules {
		if r.From == cellType {
			out = append(out, r)
		}
	}
	return out
}

// SourceTypes returns the cell types that some rule uses as its source, in the
// order of [Config.CellTypes]: the types whose [Index] the connectivity jobs need.
func (c *Config) SourceTypes() []string {
	var out []string
	for _, t := range c.CellTypes {
		if len(c.RulesFrom(t.Name)) > 0 {
			out = append(out, t.Name)
		}
	}
	return out
}

// indexCellSize returns the grid cell size, in µm, that [BuildIndex] uses for
// cellType when given none: the smallest MaxDistance of the rules from
// cellType, or the largest chunk extent if no rule starts there.
//
// The smallest, not the largest: a query of radius r scans about (2r/s+1)³
// grid cells of size s, and a grid sized for the largest radius makes the
// queries of a small radius test many times the points they keep, while a
// finer grid costs the large queries only a few more, contiguous, cells.
func (c *Config) indexCellSize(cellType string) float64 {
	s := math.Inf(1)
	for _, r := range c.RulesFrom(cellType) {
		s = min(s, r.MaxDistance)
	}
	if math.IsInf(s, 1) {
		s = max(c.Box.Chunk[0], c.Box.Chunk[1], c.Box.Chunk[2])
	}
	return s
}

// Scaled returns a copy of c whose box volume is f times c's: every box and
// chunk extent is multiplied by the cube root of f. The grid of chunks (so the
// number of jobs), the densities and the connection distances are unchanged,
// so the number of cells, the memory of each index and the connectivity work
// all scale about linearly with f. Scaled(1) equals c.
//
// Scaled panics if f is not a positive finite number.
func (c *Config) Scaled(f float64) *Config {
	if !(f > 0) || math.IsInf(f, 1) {
		panic(fmt.Sprintf("scaffold: Scaled: factor %v is not a positive finite number", f))
	}
	s := math.Cbrt(f)
	out := &Config{
		Seed:      c.Seed,
		Box:       c.Box,
		CellTypes: slices.Clone(c.CellTypes),
		Rules:     slices.Clone(c.Rules),
	}
	for d := range 3 {
		out.Box.Size[d] *= s
		out.Box.Chunk[d] *= s
	}
	return out
}

// hashVersion changes whenever the meaning of a configuration or the output
// it produces changes, so that files of an older poolrun are refused.
const hashVersion = "poolrun/scaffold v1\n"

// Hash identifies the configuration: two configurations with the same Hash
// produce the same output. It is xxhash64 over a canonical encoding of every
// field, and is stamped into every output file.
func (c *Config) Hash() uint64 {
	b, err := json.Marshal(c)
	if err != nil { // only plain fields: cannot happen, except for NaN or ±Inf
		b = fmt.Appendf(nil, "%#v", *c)
	}
	d := xxhash.New()
	d.WriteString(hashVersion)
	d.Write(b)
	return d.Sum64()
}

// Validate checks the configuration as [ParseConfig] does after decoding, and
// returns every problem found as *[ConfigError] values joined with
// [errors.Join] (without file or line), or nil.
func (c *Config) Validate() error {
	return joinProblems("", c.problems(), nil)
}

// problem is a validation failure located by a field path such as
// "cell_types[2].density"; ParseConfig maps the path to a line.
type problem struct {
	path, msg string
}

func validName(s string) bool {
	if s == "" || len(s) > 64 || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

func finitePositive(v float64) bool { return v > 0 && !math.IsInf(v, 1) }

func (c *Config) problems() []problem {
	var ps []problem
	add := func(path, format string, args ...any) {
		ps = append(ps, problem{path, fmt.Sprintf(format, args...)})
	}
	// checkName checks the name of element i of the list at field list, whose
	// elements are of a kind ("cell type"), and records it in seen.
	checkName := func(list, kind string, i int, name string, seen map[string]int) {
		p := fmt.Sprintf("%s[%d].name", list, i)
		switch j, dup := seen[name]; {
		case !validName(name):
			add(p, "%s name %q is not valid: use 1 to 64 letters, digits, '_' or '-', starting with a letter", kind, name)
		case dup:
			add(p, "%s %q is defined twice (%s[%d] and [%d])", kind, name, list, j, i)
		default:
			seen[name] = i
		}
	}
	axes := [3]string{"x", "y", "z"}
	boxOK := true
	for d := range 3 {
		if !finitePositive(c.Box.Size[d]) {
			add("box.size", "box.size: %s must be a positive number of µm, got %v", axes[d], c.Box.Size[d])
			boxOK = false
		}
		if !finitePositive(c.Box.Chunk[d]) {
			add("box.chunk", "box.chunk: %s must be a positive number of µm, got %v", axes[d], c.Box.Chunk[d])
			boxOK = false
		}
	}
	if boxOK {
		total := 1.0
		for d := range 3 {
			q := c.Box.Size[d] / c.Box.Chunk[d]
			n := math.Round(q)
			switch {
			case q < 1-1e-9:
				add("box.chunk", "box.chunk: %s = %g µm is larger than box.size %s = %g µm", axes[d], c.Box.Chunk[d], axes[d], c.Box.Size[d])
				boxOK = false
			case math.Abs(q-n) > 1e-9*n:
				add("box.chunk", "box.chunk: %s = %g µm does not divide box.size %s = %g µm into whole chunks (%.4g)", axes[d], c.Box.Chunk[d], axes[d], c.Box.Size[d], q)
				boxOK = false
			}
			total *= n
		}
		if boxOK && total > maxChunks {
			add("box.chunk", "box.chunk: %.0f chunks is more than the limit of %d", total, maxChunks)
			boxOK = false
		}
	}

	if len(c.CellTypes) == 0 {
		add("cell_types", "cell_types: at least one cell type is required")
	}
	types := map[string]int{}
	for i, t := range c.CellTypes {
		p := fmt.Sprintf("cell_types[%d]", i)
		checkName("cell_types", "cell type", i, t.Name, types)
		if !finitePositive(t.Density) {
			add(p+".density", "cell type %q: density must be a positive number of cells per mm³, got %v", t.Name, t.Density)
		} else if boxOK {
			n := t.Density * 1e-9 * c.Box.Size[0] * c.Box.Size[1] * c.Box.Size[2]
			if n > maxCellsPerType {
				add(p+".density", "cell type %q: density %g per mm³ makes %.3g cells in the box, more than the limit of %d", t.Name, t.Density, n, uint64(maxCellsPerType))
			}
		}
		if !(t.Radius >= 0) || math.IsInf(t.Radius, 1) {
			add(p+".radius", "cell type %q: radius must be a non-negative number of µm, got %v", t.Name, t.Radius)
		}
	}

	var knownNames string
	known := func() string { // the cell types, for errors about unknown ones
		if knownNames == "" {
			const most = 10
			names := make([]string, 0, most+1)
			for _, t := range c.CellTypes[:min(len(c.CellTypes), most)] {
				names = append(names, t.Name)
			}
			if len(c.CellTypes) > most {
				names = append(names, fmt.Sprintf("... (%d in all)", len(c.CellTypes)))
			}
			knownNames = strings.Join(names, ", ")
		}
		return knownNames
	}
	rules := map[string]int{}
	for i, r := range c.Rules {
		p := fmt.Sprintf("connections[%d]", i)
		checkName("connections", "connection", i, r.Name, rules)
		if _, ok := types[r.From]; !ok {
			add(p+".from", "connection %q: from: unknown cell type %q (known: %s)", r.Name, r.From, known())
		}
		if _, ok := types[r.To]; !ok {
			add(p+".to", "connection %q: to: unknown cell type %q (known: %s)", r.Name, r.To, known())
		}
		if !finitePositive(r.MaxDistance) {
			add(p+".max_distance", "connection %q: max_distance must be a positive number of µm, got %v", r.Name, r.MaxDistance)
		}
		if r.MaxPerTarget < 0 {
			add(p+".max_per_target", "connection %q: max_per_target must be positive, got %d", r.Name, r.MaxPerTarget)
		}
		if !(r.Probability >= 0 && r.Probability <= 1) {
			add(p+".probability", "connection %q: probability must be in (0, 1], got %v", r.Name, r.Probability)
		}
	}
	return ps
}
