package workflow

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/poolrun/poolrun/internal/yamlline"
)

// This file turns YAML into entries: the jobs and items as written, with
// the line of every piece, before foreach expansion and resolution.

// A parser holds what every step needs to report errors.
type parser struct {
	file string
	// What list, foreach and values read from an anchored node: an alias
	// can name the node any number of times, and reading it again would
	// give the same.
	lists  map[*yaml.Node][]text
	vars   map[*yaml.Node][]variable
	values map[*yaml.Node][]string
}

// memo returns what read returns for n, calling read only the first time
// if n is anchored; cache holds the results.
func memo[T any](cache *map[*yaml.Node]T, n *yaml.Node, read func() (T, error)) (T, error) {
	if n.Anchor == "" {
		return read()
	}
	if v, ok := (*cache)[n]; ok {
		return v, nil
	}
	v, err := read()
	if err == nil {
		if *cache == nil {
			*cache = make(map[*yaml.Node]T)
		}
		(*cache)[n] = v
	}
	return v, err
}

// errorf returns an *Error at line (at least 1).
func (p *parser) errorf(line int, format string, args ...any) error {
	if line < 1 {
		line = 1
	}
	return &Error{File: p.file, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// text is a string from the file and the line it is on.
type text struct {
	s    string
	line int
}

// entry is one element of jobs, as written.
type entry struct {
	line  int // line of the mapping
	id    text
	run   text
	after []text
	needs []text
	vars  []variable    // foreach, in file order; nil without foreach
	limit time.Duration // timeout; 0 without
}

// variable is one foreach variable and its values.
type variable struct {
	name   string
	values []string
}

// field is one key: value pair of a mapping.
type field struct {
	key     string
	keyLine int
	value   *yaml.Node
}

func (p *parser) parse(data []byte) (*Workflow, error) {
	root, err := p.document(data)
	if err != nil {
		return nil, err
	}
	if root == nil || isNull(root) {
		line := 1
		if root != nil {
			line = root.Line
		}
		return nil, p.errorf(line, "empty workflow: no jobs")
	}
	if root.Kind != yaml.MappingNode {
		return nil, p.errorf(root.Line, "a workflow is a mapping with jobs (and items), not %s", describe(root))
	}
	fields, err := p.fields(root, "workflow")
	if err != nil {
		return nil, err
	}
	var jobs, items *field
	for i := range fields {
		f := &fields[i]
		switch f.key {
		case "jobs":
			jobs = f
		case "items":
			items = f
		default:
			return nil, p.errorf(f.keyLine, "unknown field %q (a workflow has jobs and items)", f.key)
		}
	}
	w := &Workflow{File: p.file}
	if items != nil {
		if w.Items, err = p.items(items); err != nil {
			return nil, err
		}
	}
	if jobs == nil {
		return nil, p.errorf(root.Line, "empty workflow: no jobs")
	}
	entries, err := p.entries(jobs)
	if err != nil {
		return nil, err
	}
	expanded, err := p.expand(entries)
	if err != nil {
		return nil, err
	}
	if w.Jobs, err = p.resolve(expanded, w.Items); err != nil {
		return nil, err
	}
	return w, nil
}

// document decodes data, which must hold at most one YAML document, and
// returns its root node, or nil if there is none.
func (p *parser) document(data []byte) (*yaml.Node, error) {
	r := yamlline.NewReader(data)
	dec := yaml.NewDecoder(r)
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, p.yamlError(data, err, r.Offset())
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, p.yamlError(data, err, r.Offset())
	default:
		return nil, p.errorf(next.Line, "a second YAML document: a workflow file holds only one")
	}
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil, nil
		}
		return resolve(doc.Content[0]), nil
	}
	return resolve(&doc), nil
}

// yamlError turns an error of the YAML library into an *Error, at the
// line package yamlline finds. read is the number of bytes of data the
// library had read when it failed.
func (p *parser) yamlError(data []byte, err error, read int) error {
	line, msg := yamlline.Locate(data, err, read)
	if bytes.Contains(yamlline.LineText(data, line), []byte("${")) {
		msg += `; inside [ ] and { }, quote strings that contain ${...}: ["a-${i}"]`
	}
	return p.errorf(line, "bad YAML: %s", msg)
}

// resolve follows aliases to the node they stand for.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names the kind of n for error messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an alias"
}

// fields returns the pairs of the mapping n in file order, refusing keys
// that are not strings, merge keys, and keys given twice. what names the
// mapping in errors.
func (p *parser) fields(n *yaml.Node, what string) ([]field, error) {
	fs := make([]field, 0, len(n.Content)/2)
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode || isNull(k) {
			return nil, p.errorf(k.Line, "%s: a key must be a string, not %s", what, describe(k))
		}
		if k.ShortTag() == "!!merge" {
			return nil, p.errorf(k.Line, "%s: merge keys (<<) are not supported", what)
		}
		if first, ok := seen[k.Value]; ok {
			return nil, p.errorf(k.Line, "%s: %q given twice (first at line %d)", what, k.Value, first)
		}
		seen[k.Value] = k.Line
		fs = append(fs, field{key: k.Value, keyLine: k.Line, value: v})
	}
	return fs, nil
}

// items reads the items mapping.
func (p *parser) items(f *field) ([]*Item, error) {
	n := f.value
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, p.errorf(n.Line, "items must be a mapping of item names to items, not %s", describe(n))
	}
	fields, err := p.fields(n, "items")
	if err != nil {
		return nil, err
	}
	var items []*Item
	env := make(map[string]*Item, len(fields))
	for _, f := range fields {
		it, err := p.item(f)
		if err != nil {
			return nil, err
		}
		e := EnvName(it.Name)
		if other := env[e]; other != nil {
			return nil, p.errorf(it.Line, "items %q and %q (line %d) both give the environment variable %s",
				it.Name, other.Name, other.Line, e)
		}
		env[e] = it
		items = append(items, it)
	}
	return items, nil
}

// item reads one item.
func (p *parser) item(f field) (*Item, error) {
	it := &Item{Name: f.key, Line: f.keyLine}
	if !validItemName(it.Name) {
		return nil, p.errorf(it.Line, "item name %q is not valid: start with a letter or digit, then use letters, digits, _ - and .", it.Name)
	}
	name := fmt.Sprintf("item %q", it.Name)
	n := f.value
	if isNull(n) {
		return nil, p.errorf(it.Line, "%s has no run command", name)
	}
	if n.Kind != yaml.MappingNode {
		return nil, p.errorf(n.Line, "%s must be a mapping with run, not %s", name, describe(n))
	}
	fields, err := p.fields(n, name)
	if err != nil {
		return nil, err
	}
	var run *text
	for _, f := range fields {
		if f.key != "run" {
			return nil, p.errorf(f.keyLine, "%s: unknown field %q (an item has only run)", name, f.key)
		}
		if run, err = p.command(f, name); err != nil {
			return nil, err
		}
	}
	if run == nil {
		return nil, p.errorf(it.Line, "%s has no run command", name)
	}
	if it.Run, err = substitute(run.s, nil, true); err != nil {
		return nil, p.refError(run.line, name, "run", err, " (an item has no foreach)")
	}
	return it, nil
}

// command reads the run field f of the job or item called name.
func (p *parser) command(f field, name string) (*text, error) {
	n := f.value
	if n.Kind != yaml.ScalarNode {
		return nil, p.errorf(n.Line, "%s: run must be a string, not %s", name, describe(n))
	}
	if isNull(n) || strings.TrimSpace(n.Value) == "" {
		return nil, p.errorf(n.Line, "%s has no run command", name)
	}
	return &text{n.Value, n.Line}, nil
}

// entries reads the jobs list.
func (p *parser) entries(f *field) ([]*entry, error) {
	n := f.value
	if isNull(n) {
		return nil, p.errorf(f.keyLine, "empty workflow: no jobs")
	}
	if n.Kind != yaml.SequenceNode {
		return nil, p.errorf(n.Line, "jobs must be a list of jobs, not %s", describe(n))
	}
	if len(n.Content) == 0 {
		return nil, p.errorf(f.keyLine, "empty workflow: no jobs")
	}
	// An alias can repeat an entry, with its long lists, any number of
	// times: count what the entries add up to as they are read, so that
	// the work and memory stay within the limits of what they expand to.
	entries := make([]*entry, 0, min(len(n.Content), MaxJobs))
	jobs, deps, values := 0, 0, 0
	var anchored map[*yaml.Node]*entry
	for _, c := range n.Content {
		r := resolve(c)
		if first := anchored[r]; first != nil {
			return nil, p.errorf(c.Line, "job %q: an alias repeats the job of line %d, and so its ids", first.id.s, first.line)
		}
		e, err := p.entry(r)
		if err != nil {
			return nil, err
		}
		if r.Anchor != "" {
			if anchored == nil {
				anchored = make(map[*yaml.Node]*entry)
			}
			anchored[r] = e
		}
		count := e.count()
		if jobs += count; jobs > MaxJobs {
			return nil, p.errorf(e.line, "job %q: the workflow has more than %d jobs", e.id.s, MaxJobs)
		}
		if deps += len(e.after) + len(e.needs); deps > MaxDependencies {
			return nil, p.errorf(e.line, "job %q: the workflow has more than %d dependencies", e.id.s, MaxDependencies)
		}
		if values += count * len(e.vars); values > maxValues {
			return nil, p.errorf(e.line, "job %q: foreach gives the workflow's jobs more than %d values in all", e.id.s, maxValues)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// maxValues bounds the foreach values of all jobs after expansion, one per
// job and variable: ten variables for each of MaxJobs jobs.
const maxValues = 10 * MaxJobs

// count returns the number of jobs e expands into.
func (e *entry) count() int {
	n := 1
	for _, v := range e.vars {
		n *= len(v.values) // at most MaxJobs: foreach checks the product
	}
	return n
}

// entry reads one element of the jobs list.
func (p *parser) entry(n *yaml.Node) (*entry, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errorf(n.Line, "a job must be a mapping with id and run, not %s", describe(n))
	}
	e := &entry{line: n.Line}
	// Find the id first, to name the job in every other error.
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode || k.Value != "id" {
			continue
		}
		if v.Kind != yaml.ScalarNode {
			return nil, p.errorf(v.Line, "job id must be a string, not %s", describe(v))
		}
		if isNull(v) || v.Value == "" {
			return nil, p.errorf(v.Line, "job has no id")
		}
		e.id = text{v.Value, v.Line}
		break
	}
	if e.id.line == 0 {
		return nil, p.errorf(n.Line, "job has no id")
	}
	name := fmt.Sprintf("job %q", e.id.s)
	fields, err := p.fields(n, name)
	if err != nil {
		return nil, err
	}
	var run *text
	for _, f := range fields {
		switch f.key {
		case "id":
		case "run":
			run, err = p.command(f, name)
		case "after":
			e.after, err = p.list(f, name)
		case "needs":
			e.needs, err = p.list(f, name)
		case "foreach":
			e.vars, err = p.foreach(f, name)
		case "timeout":
			e.limit, err = p.timeout(f, name)
		default:
			err = p.errorf(f.keyLine, "%s: unknown field %q (a job has id, run, after, needs, foreach and timeout)", name, f.key)
		}
		if err != nil {
			return nil, err
		}
	}
	if run == nil {
		return nil, p.errorf(n.Line, "%s has no run command", name)
	}
	e.run = *run
	return e, nil
}

// list reads the after or needs field f of the job called name: a list of
// strings or a single string.
func (p *parser) list(f field, name string) ([]text, error) {
	return memo(&p.lists, f.value, func() ([]text, error) { return p.readList(f, name) })
}

func (p *parser) readList(f field, name string) ([]text, error) {
	n := f.value
	var elems []*yaml.Node
	switch {
	case isNull(n):
		return nil, nil
	case n.Kind == yaml.ScalarNode:
		elems = []*yaml.Node{n}
	case n.Kind == yaml.SequenceNode:
		elems = n.Content
	default:
		return nil, p.errorf(n.Line, "%s: %s must be a list of strings, not %s", name, f.key, describe(n))
	}
	list := make([]text, 0, len(elems))
	for _, c := range elems {
		r := resolve(c) // c.Line: where the list names it, should it be an alias
		if r.Kind != yaml.ScalarNode || isNull(r) {
			return nil, p.errorf(c.Line, "%s: %s must be a list of strings, not a list of %s", name, f.key, describe(r))
		}
		if r.Value == "" {
			return nil, p.errorf(c.Line, "%s: empty string in %s", name, f.key)
		}
		list = append(list, text{r.Value, c.Line})
	}
	return list, nil
}

// timeout reads the timeout field f of the job called name: a duration
// as time.ParseDuration takes it, more than zero.
func (p *parser) timeout(f field, name string) (time.Duration, error) {
	n := f.value
	if n.Kind != yaml.ScalarNode || isNull(n) {
		return 0, p.errorf(n.Line, "%s: timeout must be a duration such as 90s, 2m or 1h30m, not %s", name, describe(n))
	}
	d, err := time.ParseDuration(n.Value)
	switch {
	case err != nil:
		return 0, p.errorf(n.Line, "%s: timeout %q is not a duration: write a number and a unit, such as 90s, 2m or 1h30m", name, n.Value)
	case d <= 0:
		return 0, p.errorf(n.Line, "%s: timeout %q: want a duration of more than zero", name, n.Value)
	}
	return d, nil
}

// rangeRE matches an integer range A..B.
var rangeRE = regexp.MustCompile(`^(-?[0-9]+)\.\.(-?[0-9]+)$`)

// foreach reads the foreach field f of the job called name.
func (p *parser) foreach(f field, name string) ([]variable, error) {
	return memo(&p.vars, f.value, func() ([]variable, error) { return p.readForeach(f.value, name) })
}

func (p *parser) readForeach(n *yaml.Node, name string) ([]variable, error) {
	switch {
	case n.Kind == yaml.SequenceNode:
		return nil, p.errorf(n.Line, "%s: foreach must name its variables, as in foreach: {x: [a, b]}", name)
	case n.Kind != yaml.MappingNode:
		return nil, p.errorf(n.Line, "%s: foreach must map variable names to values, not %s", name, describe(n))
	case len(n.Content) == 0:
		return nil, p.errorf(n.Line, "%s: foreach is empty", name)
	}
	fields, err := p.fields(n, name+": foreach")
	if err != nil {
		return nil, err
	}
	vars := make([]variable, 0, len(fields))
	total := 1
	for _, f := range fields {
		v := variable{name: f.key}
		if !validVar(v.name) {
			return nil, p.errorf(f.keyLine, "%s: foreach variable %q is not valid: start with a-z, then use a-z, 0-9 and _", name, v.name)
		}
		what := fmt.Sprintf("%s: foreach variable %q", name, v.name)
		if v.values, err = p.foreachValues(f.value, what); err != nil {
			return nil, err
		}
		total *= len(v.values) // at most MaxJobs * MaxJobs: no overflow
		if total > MaxJobs {
			return nil, p.errorf(n.Line, "%s: foreach gives more than %d jobs", name, MaxJobs)
		}
		vars = append(vars, v)
	}
	return vars, nil
}

// foreachValues reads the values of a foreach variable, called what in
// errors.
func (p *parser) foreachValues(n *yaml.Node, what string) ([]string, error) {
	return memo(&p.values, n, func() ([]string, error) { return p.readValues(n, what) })
}

func (p *parser) readValues(n *yaml.Node, what string) ([]string, error) {
	if n.Kind == yaml.SequenceNode {
		if len(n.Content) == 0 {
			return nil, p.errorf(n.Line, "%s has an empty list", what)
		}
		if len(n.Content) > MaxJobs {
			return nil, p.errorf(n.Line, "%s has more than %d values", what, MaxJobs)
		}
		vals := make([]string, len(n.Content))
		for i, c := range n.Content {
			r := resolve(c)
			if r.Kind != yaml.ScalarNode || isNull(r) {
				return nil, p.errorf(c.Line, "%s: values must be strings, not %s", what, describe(r))
			}
			vals[i] = r.Value
		}
		return vals, nil
	}
	if n.Kind != yaml.ScalarNode || isNull(n) {
		return nil, p.errorf(n.Line, "%s: want a list or a range \"A..B\", not %s", what, describe(n))
	}
	m := rangeRE.FindStringSubmatch(n.Value)
	if m == nil {
		return nil, p.errorf(n.Line, "%s: want a list or a range \"A..B\", not %q", what, n.Value)
	}
	lo, err1 := strconv.ParseInt(m[1], 10, 64)
	hi, err2 := strconv.ParseInt(m[2], 10, 64)
	switch {
	case err1 != nil || err2 != nil:
		return nil, p.errorf(n.Line, "%s: bad range %q: number out of range", what, n.Value)
	case lo > hi:
		return nil, p.errorf(n.Line, "%s: bad range %q: the start is greater than the end", what, n.Value)
	case uint64(hi)-uint64(lo) >= MaxJobs: // exact even when hi-lo overflows int64
		return nil, p.errorf(n.Line, "%s: range %q has more than %d values", what, n.Value, MaxJobs)
	}
	width := 0
	if padded(m[1]) || padded(m[2]) {
		width = max(len(m[1]), len(m[2]))
	}
	vals := make([]string, 0, hi-lo+1)
	for i := lo; ; i++ {
		vals = append(vals, fmt.Sprintf("%0*d", width, i))
		if i == hi {
			break
		}
	}
	return vals, nil
}

// padded reports whether the integer s is written with a leading zero.
func padded(s string) bool {
	s = strings.TrimPrefix(s, "-")
	return len(s) > 1 && s[0] == '0'
}
