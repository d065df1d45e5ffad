package workflow

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/poolrun/poolrun/internal/yamlline"
)

// This file turns YAML into entries: the jobs and items as written, with
// the line of every piece, before foreach expansion and resolution.
//
// Every step reports a mistake with fail and goes on with what it can
// still read: a field that is wrong is left out, an entry without a usable
// id is dropped. A limit on the workflow's size (limit) and a YAML syntax
// error end the reading.

// A parser holds what every step needs to report mistakes.
type parser struct {
	file  string
	dir   string       // the absolute folder of file, against which outputs are checked; "" if unknown
	errs  []*Error     // the first MaxErrors mistakes
	more  int          // the mistakes after those
	lines map[int]bool // the lines with a mistake reported
	// stop: a limit was reached, and nothing more is read.
	stop bool
	// lost: a job entry or a job id could not be read, so an after entry
	// that names no job may name that one: it is not reported.
	lost bool
	// named holds every item name written, good or not: a needs entry
	// that names an item with a mistake is not a mistake of its own;
	// itemsLost: items is not a mapping, and no needs entry is checked.
	named     map[string]bool
	itemsLost bool
	// programs holds every program name of workers, with nil for one
	// with a mistake; programsLost: workers is not a mapping (workers.go).
	programs     map[string]*Worker
	programsLost bool
	// What list, foreach and values read from an anchored node: an alias
	// can name the node any number of times, and reading it again would
	// give the same (and report its mistakes again).
	lists  map[*yaml.Node]memoed[[]text]
	vars   map[*yaml.Node]memoed[[]variable]
	values map[*yaml.Node]memoed[[]string]

	// The workflow's own variables and working folder (vars.go).
	set     map[string]string // Options.Set
	globals map[string]string // vars: with Options.Set over it; nil if none
	varLine map[string]int    // line of each name of vars:; 0 for one of --set alone
	workdir string            // absolute working folder; "" if unknown
	// producers maps each output path (pathKey) to the index of its job,
	// as expand found them; made holds them, as infer sorted them.
	producers map[string]int
	made      outputKeys
	// resolved holds folders with their links followed, and outsideWhy
	// what resolvedOutside said of each folder (files.go).
	resolved, outsideWhy map[string]string
	own                  []ownEntry // ownFiles, once ownFound
	ownFound             bool
}

// memoed is what a read of an anchored node gave.
type memoed[T any] struct {
	v  T
	ok bool
}

// memo returns what read returns for n, calling read only the first time
// if n is anchored; cache holds the results.
func memo[T any](cache *map[*yaml.Node]memoed[T], n *yaml.Node, read func() (T, bool)) (T, bool) {
	if n.Anchor == "" {
		return read()
	}
	if m, found := (*cache)[n]; found {
		return m.v, m.ok
	}
	v, ok := read()
	if *cache == nil {
		*cache = make(map[*yaml.Node]memoed[T])
	}
	(*cache)[n] = memoed[T]{v, ok}
	return v, ok
}

// fail reports a mistake at line (at least 1), unless one was reported
// there already.
func (p *parser) fail(line int, format string, args ...any) {
	if line < 1 {
		line = 1
	}
	if p.lines[line] {
		return
	}
	if p.lines == nil {
		p.lines = make(map[int]bool)
	}
	p.lines[line] = true
	if len(p.errs) == MaxErrors {
		p.more++
		return
	}
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// limit reports a mistake after which nothing more is read: the workflow
// is larger than a limit allows.
func (p *parser) limit(line int, format string, args ...any) {
	p.fail(line, format, args...)
	p.stop = true
}

// failed reports whether a mistake was reported.
func (p *parser) failed() bool { return len(p.errs) > 0 }

// errors returns the mistakes reported, as an *Errors.
func (p *parser) errors() error {
	slices.SortStableFunc(p.errs, func(a, b *Error) int { return a.Line - b.Line })
	return &Errors{List: p.errs, More: p.more}
}

// text is a string from the file and the line it is on.
type text struct {
	s    string
	line int
}

// entry is one element of jobs, as written.
type entry struct {
	line    int // line of the mapping
	id      text
	run     text // s is "" when run is missing or wrong (reported)
	after   []text
	needs   []text
	inputs  []text
	outputs []text
	vars    []variable    // foreach, in file order; nil without foreach
	limit   time.Duration // timeout; 0 without
	res     resources     // retries, retry_delay, threads, mem
	desc    string        // desc; "" without
	program *text         // worker; nil without
	args    []text        // args, not yet substituted
	argsSet bool          // args is written
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
	w := p.read(data)
	if p.failed() {
		return nil, p.errors()
	}
	return w, nil
}

// read reads and checks data, reporting every mistake it finds; the
// workflow it returns is of use only if there is none.
func (p *parser) read(data []byte) *Workflow {
	root, ok := p.document(data)
	if !ok {
		return nil
	}
	if root == nil || isNull(root) {
		line := 1
		if root != nil {
			line = root.Line
		}
		p.fail(line, "empty workflow: no jobs")
		return nil
	}
	if root.Kind != yaml.MappingNode {
		p.fail(root.Line, "a workflow is a mapping with jobs (and items), not %s", describe(root))
		return nil
	}
	fields, _ := p.fields(root, "workflow")
	var jobs, items, vars, workdir, res, workers *field
	for i := range fields {
		f := &fields[i]
		switch f.key {
		case "jobs":
			jobs = f
		case "items":
			items = f
		case "vars":
			vars = f
		case "workdir":
			workdir = f
		case "resources":
			res = f
		case "workers":
			workers = f
		default:
			p.fail(f.keyLine, "unknown field %q (a workflow has jobs, items, workers, vars, workdir and resources)", f.key)
		}
	}
	p.readVars(vars, data)
	p.readWorkdir(workdir)
	w := &Workflow{File: p.file, Dir: p.workdir}
	if res != nil {
		w.Resources = p.namedResources(*res, "resources", true)
	}
	if workers != nil {
		w.Workers = p.workers(workers)
	}
	if items != nil {
		w.Items = p.items(items)
	}
	if jobs == nil {
		p.fail(root.Line, "empty workflow: no jobs")
		return nil
	}
	entries := p.entries(jobs)
	if p.stop || len(entries) == 0 {
		return nil
	}
	expanded := p.expand(entries)
	if p.stop {
		return nil
	}
	w.Jobs = p.resolve(expanded, w.Items)
	return w
}

// document decodes data, which must hold at most one YAML document, and
// returns its root node, or nil if there is none. It reports a YAML error,
// after which nothing can be read, and returns false.
func (p *parser) document(data []byte) (*yaml.Node, bool) {
	doc, next, err := yamlline.Decode(data)
	var bad *yamlline.Error
	switch {
	case errors.As(err, &bad):
		p.yamlError(data, bad)
		return nil, false
	case err != nil:
		p.fail(1, "bad YAML: %v", err)
		return nil, false
	case doc == nil:
		return nil, true
	case next > 0:
		p.fail(next, "a second YAML document: a workflow file holds only one")
		return nil, false
	}
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil, true
		}
		return resolve(doc.Content[0]), true
	}
	return resolve(doc), true
}

// yamlError reports an error of the YAML library in data.
func (p *parser) yamlError(data []byte, err *yamlline.Error) {
	msg := err.Msg
	if bytes.Contains(yamlline.LineText(data, err.Line), []byte("${")) {
		msg += `; inside [ ] and { }, quote strings that contain ${...}: ["a-${i}"]`
	}
	p.fail(err.Line, "bad YAML: %s", msg)
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

// fields returns the pairs of the mapping n in file order. A key that is
// not a string, a merge key and a key given again are reported and left
// out, and ok is false. what names the mapping in errors.
func (p *parser) fields(n *yaml.Node, what string) (fs []field, ok bool) {
	fs = make([]field, 0, len(n.Content)/2)
	seen := make(map[string]int, len(n.Content)/2)
	ok = true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		switch first, again := seen[k.Value]; {
		case k.Kind != yaml.ScalarNode || isNull(k):
			p.fail(k.Line, "%s: a key must be a string, not %s", what, describe(k))
		case k.ShortTag() == "!!merge":
			p.fail(k.Line, "%s: merge keys (<<) are not supported", what)
		case again:
			p.fail(k.Line, "%s: %q given twice (first at line %d)", what, k.Value, first)
		default:
			seen[k.Value] = k.Line
			fs = append(fs, field{key: k.Value, keyLine: k.Line, value: v})
			continue
		}
		ok = false
	}
	return fs, ok
}

// items reads the items mapping, leaving out the items with mistakes.
func (p *parser) items(f *field) []*Item {
	n := f.value
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.fail(n.Line, "items must be a mapping of item names to items, not %s", describe(n))
		p.itemsLost = true
		return nil
	}
	fields, _ := p.fields(n, "items")
	var items []*Item
	env := make(map[string]*Item, len(fields))
	p.named = make(map[string]bool, len(fields))
	for _, f := range fields {
		p.named[f.key] = true
		it := p.item(f)
		if it == nil {
			continue
		}
		e := EnvName(it.Name)
		if other := env[e]; other != nil {
			p.fail(it.Line, "items %q and %q (line %d) both give the environment variable %s",
				it.Name, other.Name, other.Line, e)
			continue
		}
		env[e] = it
		items = append(items, it)
	}
	return items
}

// item reads one item; it returns nil if the item has a mistake.
func (p *parser) item(f field) *Item {
	it := &Item{Name: f.key, Line: f.keyLine}
	if !p.validName("item", it.Name, it.Line) {
		return nil
	}
	name := fmt.Sprintf("item %q", it.Name)
	n := f.value
	if isNull(n) {
		p.fail(it.Line, "%s has no run command", name)
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.fail(n.Line, "%s must be a mapping with run (or worker), not %s", name, describe(n))
		return nil
	}
	fields, ok := p.fields(n, name)
	var run, program *text
	runSeen := false
	for _, f := range fields {
		switch f.key {
		case "run":
			runSeen = true
			run = p.command(f, name)
		case "worker":
			if program = p.programField(f, name); program == nil {
				ok = false
			}
		default:
			p.fail(f.keyLine, "%s: unknown field %q (an item has run or worker)", name, f.key)
			ok = false
		}
	}
	switch {
	case runSeen && program != nil:
		p.fail(it.Line, "%s has both run and worker: an item is built by its run command, or held by a worker program", name)
		return nil
	case program != nil:
		if !ok {
			return nil
		}
		if it.Worker = p.program(*program, name); it.Worker == "" {
			return nil
		}
		return it
	case !runSeen && ok:
		p.fail(it.Line, "%s has no run command", name)
		return nil
	case run == nil || !ok:
		return nil
	}
	s, err := substituteRun(run.s, p.globalScope())
	if err != nil {
		p.refError(run.line, name, "run", err, " (an item has no foreach)"+p.globalsDefined())
		return nil
	}
	it.Run = s
	return it
}

// command reads the run field f of the job or item called name; it
// returns nil if the field has a mistake.
func (p *parser) command(f field, name string) *text {
	n := f.value
	if n.Kind != yaml.ScalarNode {
		p.fail(n.Line, "%s: run must be a string, not %s", name, describe(n))
		return nil
	}
	if isNull(n) || strings.TrimSpace(n.Value) == "" {
		p.fail(n.Line, "%s has no run command", name)
		return nil
	}
	return &text{n.Value, n.Line}
}

// entries reads the jobs list, leaving out the entries that cannot be
// read. It stops at a limit (p.stop).
func (p *parser) entries(f *field) []*entry {
	n := f.value
	if isNull(n) {
		p.fail(f.keyLine, "empty workflow: no jobs")
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.fail(n.Line, "jobs must be a list of jobs, not %s", describe(n))
		return nil
	}
	if len(n.Content) == 0 {
		p.fail(f.keyLine, "empty workflow: no jobs")
		return nil
	}
	// An alias can repeat an entry, with its long lists, any number of
	// times: count what the entries add up to as they are read, so that
	// the work and memory stay within the limits of what they expand to.
	entries := make([]*entry, 0, min(len(n.Content), limits.jobs))
	jobs, deps, values, paths := 0, 0, 0, 0
	type anchor struct {
		e        *entry // nil if it could not be read
		repeated bool   // reported as repeated
	}
	var anchored map[*yaml.Node]*anchor
	for _, c := range n.Content {
		r := resolve(c)
		if first := anchored[r]; first != nil {
			if first.e != nil && !first.repeated {
				p.fail(c.Line, "job %q: an alias repeats the job of line %d, and so its ids", first.e.id.s, first.e.line)
				first.repeated = true
			}
			continue
		}
		e := p.entry(r)
		if r.Anchor != "" {
			if anchored == nil {
				anchored = make(map[*yaml.Node]*anchor)
			}
			anchored[r] = &anchor{e: e}
		}
		if e == nil {
			continue
		}
		count := e.count()
		if jobs += count; jobs > limits.jobs {
			p.limit(e.line, "job %q: the workflow has more than %d jobs", e.id.s, limits.jobs)
			return entries
		}
		if deps += len(e.after) + len(e.needs); deps > limits.deps {
			p.limit(e.line, "job %q: the workflow has more than %d dependencies", e.id.s, limits.deps)
			return entries
		}
		if values += count * len(e.vars); values > limits.values {
			p.limit(e.line, "job %q: foreach gives the workflow's jobs more than %d values in all", e.id.s, limits.values)
			return entries
		}
		if paths += count * (len(e.inputs) + len(e.outputs)); paths > limits.paths {
			p.limit(e.line, "job %q: the workflow's jobs have more than %d inputs and outputs in all", e.id.s, limits.paths)
			return entries
		}
		entries = append(entries, e)
	}
	return entries
}

// maxValues bounds the foreach values of all jobs after expansion, one per
// job and variable: ten variables for each of MaxJobs jobs.
const maxValues = 10 * MaxJobs

// count returns the number of jobs e expands into.
func (e *entry) count() int {
	n := 1
	for _, v := range e.vars {
		n *= len(v.values) // at most limits.jobs: foreach checks the product
	}
	return n
}

// jobFields lists the fields of a job, for the error about another.
const jobFields = "id, run, worker, args, after, needs, inputs, outputs, foreach, timeout, retries, retry_delay, threads, mem, resources and desc"

// entry reads one element of the jobs list. It returns nil, and sets
// p.lost, when the entry has no usable id or foreach: the jobs it stands
// for are unknown.
func (p *parser) entry(n *yaml.Node) *entry {
	if n.Kind != yaml.MappingNode {
		p.fail(n.Line, "a job must be a mapping with id and run, not %s", describe(n))
		p.lost = true
		return nil
	}
	e := &entry{line: n.Line}
	// Find the id first, to name the job in every other error.
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode || k.Value != "id" {
			continue
		}
		switch {
		case v.Kind != yaml.ScalarNode:
			p.fail(v.Line, "job id must be a string, not %s", describe(v))
		case isNull(v) || v.Value == "":
			p.fail(v.Line, "job has no id")
		default:
			e.id = text{v.Value, v.Line}
		}
		if e.id.line == 0 {
			p.lost = true
			return nil
		}
		break
	}
	if e.id.line == 0 {
		p.fail(n.Line, "job has no id")
		p.lost = true
		return nil
	}
	name := fmt.Sprintf("job %q", e.id.s)
	fields, _ := p.fields(n, name)
	runSeen, foreachOK := false, true
	for _, f := range fields {
		switch f.key {
		case "id":
		case "run":
			runSeen = true
			if run := p.command(f, name); run != nil {
				e.run = *run
			}
		case "worker":
			e.program = p.programField(f, name)
		case "args":
			e.argsSet = true
			e.args, _ = p.strings(f, name, true)
		case "after":
			e.after, _ = p.list(f, name)
		case "needs":
			e.needs, _ = p.list(f, name)
		case "inputs":
			e.inputs, _ = p.list(f, name)
		case "outputs":
			e.outputs, _ = p.list(f, name)
		case "foreach":
			e.vars, foreachOK = p.foreach(f, name)
		case "timeout":
			e.limit = p.duration(f, name)
		case "retries", "retry_delay", "threads", "mem":
			p.resource(&e.res, f, name)
		case "resources":
			e.res.named = p.namedResources(f, name, false)
		case "desc":
			if f.value.Kind != yaml.ScalarNode || isNull(f.value) {
				p.fail(f.value.Line, "%s: desc must be a string, not %s", name, describe(f.value))
				continue
			}
			e.desc = f.value.Value
		default:
			p.fail(f.keyLine, "%s: unknown field %q (a job has %s)", name, f.key, jobFields)
		}
	}
	switch {
	case runSeen && e.program != nil:
		p.fail(e.program.line, "%s has both run and worker: a job runs its command, or sends its args to a worker program", name)
	case e.program != nil:
		if w := p.program(*e.program, name); w == "" {
			e.program = nil
		}
	case e.argsSet:
		p.fail(n.Line, "%s has args but no worker: args are a request to a worker program (a command has them in its run)", name)
	case !runSeen:
		p.fail(n.Line, "%s has no run command", name)
	}
	if !foreachOK {
		p.lost = true
		return nil
	}
	return e
}

// list reads the after, needs, inputs or outputs field f of the job
// called name: a list of strings or a single string. It returns false if
// the field has a mistake.
func (p *parser) list(f field, name string) ([]text, bool) {
	return memo(&p.lists, f.value, func() ([]text, bool) { return p.readList(f, name) })
}

func (p *parser) readList(f field, name string) ([]text, bool) {
	return p.strings(f, name, false)
}

// strings reads the field f of the job called name, a list of strings or
// a single string; empty strings are a mistake unless empty says. It
// returns false if the field has a mistake.
func (p *parser) strings(f field, name string, empty bool) ([]text, bool) {
	n := f.value
	var elems []*yaml.Node
	switch {
	case isNull(n):
		return nil, true
	case n.Kind == yaml.ScalarNode:
		elems = []*yaml.Node{n}
	case n.Kind == yaml.SequenceNode:
		elems = n.Content
	default:
		p.fail(n.Line, "%s: %s must be a list of strings, not %s", name, f.key, describe(n))
		return nil, false
	}
	list := make([]text, 0, len(elems))
	for _, c := range elems {
		r := resolve(c) // c.Line: where the list names it, should it be an alias
		if r.Kind != yaml.ScalarNode || isNull(r) {
			p.fail(c.Line, "%s: %s must be a list of strings, not a list of %s", name, f.key, describe(r))
			return nil, false
		}
		if r.Value == "" && !empty {
			p.fail(c.Line, "%s: empty string in %s", name, f.key)
			return nil, false
		}
		list = append(list, text{r.Value, c.Line})
	}
	return list, true
}

// duration reads the timeout or retry_delay field f of the job called
// name: a duration as time.ParseDuration takes it, more than zero. It
// returns 0 if the field has a mistake.
func (p *parser) duration(f field, name string) time.Duration {
	n := f.value
	if n.Kind != yaml.ScalarNode || isNull(n) {
		p.fail(n.Line, "%s: %s must be a duration such as 90s, 2m or 1h30m, not %s", name, f.key, describe(n))
		return 0
	}
	d, err := time.ParseDuration(n.Value)
	switch {
	case err != nil:
		p.fail(n.Line, "%s: %s %q is not a duration: write a number and a unit, such as 90s, 2m or 1h30m", name, f.key, n.Value)
		return 0
	case d <= 0:
		p.fail(n.Line, "%s: %s %q: want a duration of more than zero", name, f.key, n.Value)
		return 0
	}
	return d
}

// rangeRE matches an integer range A..B.
var rangeRE = regexp.MustCompile(`^(-?[0-9]+)\.\.(-?[0-9]+)$`)

// foreach reads the foreach field f of the job called name. It returns
// false if the field has a mistake.
func (p *parser) foreach(f field, name string) ([]variable, bool) {
	return memo(&p.vars, f.value, func() ([]variable, bool) { return p.readForeach(f.value, name) })
}

func (p *parser) readForeach(n *yaml.Node, name string) ([]variable, bool) {
	switch {
	case n.Kind == yaml.SequenceNode:
		p.fail(n.Line, "%s: foreach must name its variables, as in foreach: {x: [a, b]}", name)
		return nil, false
	case n.Kind != yaml.MappingNode:
		p.fail(n.Line, "%s: foreach must map variable names to values, not %s", name, describe(n))
		return nil, false
	case len(n.Content) == 0:
		p.fail(n.Line, "%s: foreach is empty", name)
		return nil, false
	}
	fields, ok := p.fields(n, name+": foreach")
	vars := make([]variable, 0, len(fields))
	total := 1
	for _, f := range fields {
		v := variable{name: f.key}
		if !validVar(v.name) {
			p.fail(f.keyLine, "%s: foreach variable %q is not valid: start with a-z, then use a-z, 0-9 and _", name, v.name)
			ok = false
			continue
		}
		if clash := p.clash(v.name); clash != "" {
			p.fail(f.keyLine, "%s: foreach variable %q is also %s: rename one", name, v.name, clash)
			ok = false
			continue
		}
		what := fmt.Sprintf("%s: foreach variable %q", name, v.name)
		values, good := p.foreachValues(f.value, what)
		if !good {
			ok = false
			continue
		}
		v.values = values
		total *= len(v.values) // at most limits.jobs * limits.jobs: no overflow
		if total > limits.jobs {
			p.fail(n.Line, "%s: foreach gives more than %d jobs", name, limits.jobs)
			return nil, false
		}
		vars = append(vars, v)
	}
	if !ok {
		return nil, false
	}
	return vars, true
}

// foreachValues reads the values of a foreach variable, called what in
// errors. It returns false if they have a mistake.
func (p *parser) foreachValues(n *yaml.Node, what string) ([]string, bool) {
	return memo(&p.values, n, func() ([]string, bool) { return p.readValues(n, what) })
}

func (p *parser) readValues(n *yaml.Node, what string) ([]string, bool) {
	if n.Kind == yaml.SequenceNode {
		if len(n.Content) == 0 {
			p.fail(n.Line, "%s has an empty list", what)
			return nil, false
		}
		if len(n.Content) > limits.jobs {
			p.fail(n.Line, "%s has more than %d values", what, limits.jobs)
			return nil, false
		}
		vals := make([]string, len(n.Content))
		for i, c := range n.Content {
			r := resolve(c)
			if r.Kind != yaml.ScalarNode || isNull(r) {
				p.fail(c.Line, "%s: values must be strings, not %s", what, describe(r))
				return nil, false
			}
			vals[i] = r.Value
		}
		return vals, true
	}
	if n.Kind != yaml.ScalarNode || isNull(n) {
		p.fail(n.Line, "%s: want a list, a range \"A..B\" or a glob of files, not %s", what, describe(n))
		return nil, false
	}
	value, ok := p.substituteGlobals(n.Value, n.Line, what)
	if !ok {
		return nil, false
	}
	if IsPattern(value) {
		return p.globValues(value, n.Line, what)
	}
	m := rangeRE.FindStringSubmatch(value)
	if m == nil {
		p.fail(n.Line, "%s: want a list, a range \"A..B\" or a glob of files such as \"data/*.csv\", not %q", what, value)
		return nil, false
	}
	lo, err1 := strconv.ParseInt(m[1], 10, 64)
	hi, err2 := strconv.ParseInt(m[2], 10, 64)
	switch {
	case err1 != nil || err2 != nil:
		p.fail(n.Line, "%s: bad range %q: number out of range", what, value)
		return nil, false
	case lo > hi:
		p.fail(n.Line, "%s: bad range %q: the start is greater than the end", what, value)
		return nil, false
	case uint64(hi)-uint64(lo) >= uint64(limits.jobs): // exact even when hi-lo overflows int64
		p.fail(n.Line, "%s: range %q has more than %d values", what, value, limits.jobs)
		return nil, false
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
	return vals, true
}

// padded reports whether the integer s is written with a leading zero.
func padded(s string) bool {
	s = strings.TrimPrefix(s, "-")
	return len(s) > 1 && s[0] == '0'
}
