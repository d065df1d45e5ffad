package scaffold

import (
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/poolrun/poolrun/internal/regfile"
	"github.com/poolrun/poolrun/internal/yamlline"
)

// MaxConfigSize bounds the size of a configuration file that [LoadConfig]
// reads, 16 MiB: a larger file is refused from its size before it is read,
// or, if it grows while it is read, after MaxConfigSize+1 bytes.
const MaxConfigSize = 16 << 20

// LoadConfig reads the configuration file at path and parses it as
// [ParseConfig] does, with path as the file name. The file must be a
// regular file: a named pipe, a device (such as /dev/zero) or a directory
// is refused at once, without waiting for a writer, with an error that
// names the path, says what it is and matches [regfile.ErrNotRegular]. If
// the file cannot be read it returns the error of opening or reading it,
// which names the path; if it holds more than [MaxConfigSize] bytes, an
// error that names the path, gives its size and the limit and matches
// [regfile.ErrTooLarge].
func LoadConfig(path string) (*Config, error) {
	data, err := regfile.ReadFile(path, MaxConfigSize)
	if err != nil {
		return nil, err
	}
	return ParseConfig(path, data)
}

// ParseConfig decodes and validates a YAML configuration. file names data in
// error messages. Decoding is strict: an unknown or repeated field, a value of
// the wrong kind, a missing required field, or a second YAML document is an
// error, as is anything [Config.Validate] refuses. Every problem is reported as
// a *[ConfigError] "FILE:LINE: what is wrong"; several are joined with
// [errors.Join], at most 20.
//
// The fields are those of [Config] in snake case; see the embedded default
// ([DefaultConfig]) for a commented example. box.size and box.chunk take a
// list of three numbers (x, y, z) or one number for all three. YAML anchors
// and aliases are allowed, but an alias that repeats an element of
// cell_types or connections is refused, as it repeats the element's name.
func ParseConfig(file string, data []byte) (*Config, error) {
	p := &parser{file: file, lines: map[string]int{}}
	doc, next, err := yamlline.Decode(data)
	var bad *yamlline.Error
	switch {
	case errors.As(err, &bad):
		return nil, &ConfigError{File: file, Line: bad.Line, Msg: "invalid YAML: " + bad.Msg}
	case err != nil:
		return nil, &ConfigError{File: file, Line: 1, Msg: "invalid YAML: " + err.Error()}
	case doc == nil:
		return nil, &ConfigError{File: file, Line: 1, Msg: "empty configuration"}
	case next > 0:
		return nil, &ConfigError{File: file, Line: next, Msg: "a second YAML document; a configuration is one document"}
	}
	c := &Config{}
	if len(doc.Content) == 1 {
		p.config(doc.Content[0], c)
	} else {
		p.fail(doc, "empty configuration")
	}
	if len(p.errs) > 0 {
		return nil, joinErrors(p.errs, p.more)
	}
	if err := joinProblems(file, c.problems(), p.lines); err != nil {
		return nil, err
	}
	return c, nil
}

// maxErrors is the number of problems ParseConfig reports at most.
const maxErrors = 20

// joinErrors joins the first maxErrors of errs and a last "... and N more"
// that counts the others and more.
func joinErrors(errs []error, more int) error {
	if len(errs) > maxErrors {
		more += len(errs) - maxErrors
		errs = errs[:maxErrors:maxErrors]
	}
	if more > 0 {
		errs = append(errs, fmt.Errorf("... and %d more", more))
	}
	return errors.Join(errs...)
}

// joinProblems turns validation problems into ConfigErrors, locating each
// path (or its nearest parent) in lines.
func joinProblems(file string, ps []problem, lines map[string]int) error {
	if len(ps) == 0 {
		return nil
	}
	errs := make([]error, 0, len(ps))
	for _, pr := range ps {
		line := 0
		for path := pr.path; path != ""; {
			if l, ok := lines[path]; ok {
				line = l
				break
			}
			i := strings.LastIndexAny(path, ".[")
			if i < 0 {
				break
			}
			path = path[:i]
		}
		errs = append(errs, &ConfigError{File: file, Line: line, Msg: pr.msg})
	}
	return joinErrors(errs, 0)
}

// parser walks the YAML node tree, so that it knows the line of every field
// and words its own messages.
type parser struct {
	file  string
	lines map[string]int // field path -> line
	errs  []error        // the first maxErrors problems
	more  int            // the problems after those
}

func (p *parser) fail(n *yaml.Node, format string, args ...any) {
	if len(p.errs) == maxErrors {
		p.more++
		return
	}
	p.errs = append(p.errs, &ConfigError{File: p.file, Line: n.Line, Msg: fmt.Sprintf(format, args...)})
}

func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// field describes one key of a mapping.
type field struct {
	key      string
	required bool
	set      func(path string, v *yaml.Node)
}

// mapping checks that n is a mapping with only the given keys, each at most
// once and the required ones present, and calls their set functions in the
// order the keys appear.
func (p *parser) mapping(n *yaml.Node, path string, fields []field) {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		p.fail(n, "%swant a mapping of %s", prefix(path), fieldNames(fields))
		return
	}
	p.lines[path] = n.Line
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if prev, dup := seen[k.Value]; dup {
			p.fail(k, "%sfield %q repeated (first at line %d)", prefix(path), k.Value, prev)
			continue
		}
		seen[k.Value] = k.Line
		j := -1
		for fi, f := range fields {
			if f.key == k.Value {
				j = fi
			}
		}
		if j < 0 {
			p.fail(k, "%sunknown field %q (want %s)", prefix(path), k.Value, fieldNames(fields))
			continue
		}
		fp := fields[j].key
		if path != "" {
			fp = path + "." + fp
		}
		p.lines[fp] = k.Line
		fields[j].set(fp, v)
	}
	for _, f := range fields {
		if _, ok := seen[f.key]; f.required && !ok {
			where := path
			if where == "" {
				where = "configuration"
			}
			p.fail(n, "%s: missing required field %q", where, f.key)
		}
	}
}

// prefix returns "path: ", or "" for the top level.
func prefix(path string) string {
	if path == "" {
		return ""
	}
	return path + ": "
}

func fieldNames(fields []field) string {
	var names []string
	for _, f := range fields {
		names = append(names, f.key)
	}
	return strings.Join(names, ", ")
}

// scalar decodes a non-null scalar node into v, or reports that it wants what.
func (p *parser) scalar(n *yaml.Node, path, what string, v any) bool {
	n = resolve(n)
	switch {
	case n.Kind != yaml.ScalarNode:
		p.fail(n, "%s: want %s", path, what)
	case n.ShortTag() == "!!null":
		p.fail(n, "%s: value missing, want %s", path, what)
	case n.Decode(v) != nil:
		p.fail(n, "%s: want %s, got %q", path, what, n.Value)
	default:
		return true
	}
	return false
}

func (p *parser) number(n *yaml.Node, path string, dst *float64) {
	p.scalar(n, path, "a number", dst)
}

// integer decodes an integer: yaml.v3 would truncate a float into an int.
func (p *parser) integer(n *yaml.Node, path, what string, dst any) bool {
	if r := resolve(n); r.Kind == yaml.ScalarNode && r.ShortTag() == "!!float" {
		p.fail(r, "%s: want %s, got %q", path, what, r.Value)
		return false
	}
	return p.scalar(n, path, what, dst)
}

func (p *parser) name(n *yaml.Node, path string, dst *string) {
	if r := resolve(n); r.Kind == yaml.ScalarNode && r.ShortTag() != "!!str" && r.ShortTag() != "!!null" {
		p.fail(r, "%s: want a name, got %s %q (quote it if you mean it)", path, r.ShortTag(), r.Value)
		return
	}
	p.scalar(n, path, "a name", dst)
}

// vec3 decodes [x, y, z] or a single number meaning all three.
func (p *parser) vec3(n *yaml.Node, path string, dst *[3]float64) {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode {
		var v float64
		if p.scalar(n, path, "a number or a list of three numbers [x, y, z]", &v) {
			*dst = [3]float64{v, v, v}
		}
		return
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) != 3 {
		p.fail(n, "%s: want a list of three numbers [x, y, z] or one number", path)
		return
	}
	for i, e := range n.Content {
		p.number(e, fmt.Sprintf("%s[%d]", path, i), &dst[i])
	}
}

// sequence calls each for every element of the sequence n.
func (p *parser) sequence(n *yaml.Node, path string, each func(path string, e *yaml.Node)) {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // "connections:" with nothing: an empty list
	}
	if n.Kind != yaml.SequenceNode {
		p.fail(n, "%s: want a list", path)
		return
	}
	// An alias that repeats an element repeats its name, which must be
	// unique: refuse it without reading the element again, so that a few
	// aliases of a large element cannot make a large configuration.
	var first map[*yaml.Node]int // anchored elements -> index of their first use
	for i, e := range n.Content {
		ep := fmt.Sprintf("%s[%d]", path, i)
		r := resolve(e)
		if r.Anchor != "" {
			if j, ok := first[r]; ok {
				p.fail(e, "%s: an alias repeats %s[%d] (line %d), and so its name", ep, path, j, r.Line)
				continue
			}
			if first == nil {
				first = make(map[*yaml.Node]int)
			}
			first[r] = i
		}
		p.lines[ep] = r.Line
		each(ep, e)
	}
}

func (p *parser) config(n *yaml.Node, c *Config) {
	p.mapping(n, "", []field{
		{"seed", false, func(path string, v *yaml.Node) {
			p.integer(v, path, "a non-negative integer", &c.Seed)
		}},
		{"box", true, func(path string, v *yaml.Node) {
			p.mapping(v, path, []field{
				{"size", true, func(path string, v *yaml.Node) { p.vec3(v, path, &c.Box.Size) }},
				{"chunk", true, func(path string, v *yaml.Node) { p.vec3(v, path, &c.Box.Chunk) }},
			})
		}},
		{"cell_types", true, func(path string, v *yaml.Node) {
			p.sequence(v, path, func(path string, e *yaml.Node) {
				var t CellType
				p.mapping(e, path, []field{
					{"name", true, func(path string, v *yaml.Node) { p.name(v, path, &t.Name) }},
					{"density", true, func(path string, v *yaml.Node) { p.number(v, path, &t.Density) }},
					{"radius", false, func(path string, v *yaml.Node) { p.number(v, path, &t.Radius) }},
				})
				c.CellTypes = append(c.CellTypes, t)
			})
		}},
		{"connections", false, func(path string, v *yaml.Node) {
			p.sequence(v, path, func(path string, e *yaml.Node) {
				var r Rule
				p.mapping(e, path, []field{
					{"name", true, func(path string, v *yaml.Node) { p.name(v, path, &r.Name) }},
					{"from", true, func(path string, v *yaml.Node) { p.name(v, path, &r.From) }},
					{"to", true, func(path string, v *yaml.Node) { p.name(v, path, &r.To) }},
					{"max_distance", true, func(path string, v *yaml.Node) { p.number(v, path, &r.MaxDistance) }},
					{"max_per_target", false, func(path string, v *yaml.Node) {
						if p.integer(v, path, "a positive integer", &r.MaxPerTarget) && r.MaxPerTarget <= 0 {
							p.fail(v, "%s: want a positive integer, got %d (leave it out for no limit)", path, r.MaxPerTarget)
						}
					}},
					{"probability", false, func(path string, v *yaml.Node) {
						if p.scalar(v, path, "a number in (0, 1]", &r.Probability) && !(r.Probability > 0 && r.Probability <= 1) {
							p.fail(v, "%s: want a number in (0, 1], got %v", path, r.Probability)
						}
					}},
				})
				c.Rules = append(c.Rules, r)
			})
		}},
	})
}
