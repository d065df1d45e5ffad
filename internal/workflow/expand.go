package workflow

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// This file expands foreach entries into jobs and substitutes ${name}.

// job is a Job being built, with the lines that errors about it need.
type job struct {
	*Job
	idLine  int
	entry   *entry
	after   []text // substituted, not yet resolved
	needs   []text // substituted, not yet checked
	outputs []text // substituted and checked, for the lines
}

// expand turns entries into jobs, in file order, reporting bad and
// duplicate ids (and leaving those jobs out) and bad references. It stops
// at a limit (p.stop).
func (p *parser) expand(entries []*entry) []*job {
	var jobs []*job
	byID := make(map[string]*job)
	outputs := make(map[string]int) // plain outputs by pathKey: the index of the job in jobs
	deps, paths, size := 0, 0, 0    // after and needs entries, inputs and outputs, bytes of text
	for _, e := range entries {
		name := fmt.Sprintf("job %q", e.id.s)
		count := e.count()
		if len(jobs)+count > limits.jobs {
			p.limit(e.line, "%s: the workflow has more than %d jobs", name, limits.jobs)
			return jobs
		}
		// Aliases can repeat a long list in every entry, and foreach a long
		// command in every job: count before copying.
		if deps += count * (len(e.after) + len(e.needs)); deps > limits.deps {
			p.limit(e.line, "%s: the workflow has more than %d dependencies", name, limits.deps)
			return jobs
		}
		if paths += count * (len(e.inputs) + len(e.outputs)); paths > limits.paths {
			p.limit(e.line, "%s: the workflow's jobs have more than %d inputs and outputs in all", name, limits.paths)
			return jobs
		}
		if count*e.textSize() > limits.text-size {
			p.limit(e.line, "%s: the workflow's ids, commands and paths come to more than %d MiB", name, limits.text>>20)
			return jobs
		}
		idx := make([]int, len(e.vars)) // odometer over the values, first variable outermost
		shared := e.res.entry(&Entry{Line: e.line, Timeout: e.limit, EntryID: e.id.s, Desc: e.desc, varNames: e.varNames()})
		if e.program != nil {
			shared.Worker = e.program.s
		}
		for range count {
			var vars []string
			if len(e.vars) > 0 {
				vars = make([]string, len(e.vars))
				for i, v := range e.vars {
					vars[i] = v.values[idx[i]]
				}
			}
			for i := len(idx) - 1; i >= 0; i-- {
				if idx[i]++; idx[i] < len(e.vars[i].values) {
					break
				}
				idx[i] = 0
			}
			j := p.instance(e, name, shared, vars)
			if j == nil {
				continue
			}
			if first := byID[j.ID]; first != nil {
				if first.entry == e {
					p.fail(e.id.line, "%s: foreach gives the id %q twice (%s and %s)",
						name, j.ID, e.describeVars(first.varValues), e.describeVars(vars))
				} else {
					p.fail(j.idLine, "duplicate job id %q (first at line %d)", j.ID, first.idLine)
				}
				continue
			}
			if size += j.textSize(); size > limits.text {
				p.limit(e.line, "%s: the workflow's ids, commands and paths come to more than %d MiB", name, limits.text>>20)
				return jobs
			}
			for _, o := range j.outputs {
				if IsPattern(o.s) {
					continue
				}
				key := p.pathKey(o.s)
				if k, dup := outputs[key]; dup {
					other := jobs[k]
					p.fail(o.line, "%s: output %q is also an output of job %q (line %d)", name, o.s, other.ID, other.Line)
					continue
				}
				outputs[key] = len(jobs)
			}
			byID[j.ID] = j
			jobs = append(jobs, j)
		}
	}
	p.producers = outputs // for infer
	return jobs
}

// varNames returns the names of e's foreach variables, in order; nil
// without foreach.
func (e *entry) varNames() []string {
	if len(e.vars) == 0 {
		return nil
	}
	names := make([]string, len(e.vars))
	for i, v := range e.vars {
		names[i] = v.name
	}
	return names
}

// maxText bounds the bytes of all ids, run commands, inputs and outputs
// after foreach expansion, which can multiply a long command by MaxJobs:
// 1 GiB, 100 bytes a job.
const maxText = 1 << 30

// limits are the bounds the parser checks: MaxJobs and the others, which
// the package's tests lower to keep their workflows small.
var limits = struct{ jobs, deps, paths, text, values int }{MaxJobs, MaxDependencies, MaxPaths, maxText, maxValues}

// textSize is the bytes of e's id, command, inputs and outputs, about
// what each of its jobs takes.
func (e *entry) textSize() int {
	n := len(e.id.s) + len(e.run.s)
	for _, t := range e.args {
		n += len(t.s)
	}
	for _, t := range e.inputs {
		n += len(t.s)
	}
	for _, t := range e.outputs {
		n += len(t.s)
	}
	return n
}

// textSize is the bytes of j's id, command, inputs and outputs.
func (j *job) textSize() int {
	n := len(j.ID) + len(j.Run)
	for _, s := range j.Args {
		n += len(s)
	}
	for _, s := range j.Inputs {
		n += len(s)
	}
	for _, s := range j.Outputs {
		n += len(s)
	}
	return n
}

// instance makes the job of entry e, called name in errors, for one
// combination of foreach values. It returns nil, and sets p.lost, when
// the job's id cannot be made; a mistake elsewhere is reported and the
// job kept without the part at fault.
func (p *parser) instance(e *entry, name string, shared *Entry, values []string) *job {
	j := &job{
		Job:    &Job{Entry: shared, varValues: values},
		idLine: e.id.line,
		entry:  e,
	}
	vars := scope{names: shared.varNames, values: values, globals: p.globals}
	var err error
	if j.ID, err = substitute(e.id.s, vars); err != nil {
		p.refError(e.id.line, name, "id", err, p.defines(e))
		p.lost = true
		return nil
	}
	if !validID(j.ID) {
		what := ""
		if j.varValues != nil {
			what = " (" + e.describeVars(j.varValues) + ")"
		}
		p.fail(e.id.line, "job id %q%s is not valid: use letters, digits and %s", j.ID, what, idPunct)
		p.lost = true
		return nil
	}
	if e.program != nil {
		j.Args = p.substituteArgs(e, vars)
	} else if j.Run, err = substituteRun(e.run.s, vars); err != nil {
		p.refError(e.run.line, name, "run", err, p.defines(e))
	}
	j.after = p.substituteAll(e.after, vars, e, "after")
	j.needs = p.substituteAll(e.needs, vars, e, "needs")
	j.Inputs, _ = p.paths(e.inputs, vars, e, "inputs")
	j.Outputs, j.outputs = p.paths(e.outputs, vars, e, "outputs")
	return j
}

// substituteAll substitutes vars into the after or needs entries list of
// e. It reports the entries with a mistake and leaves them out.
func (p *parser) substituteAll(list []text, vars scope, e *entry, field string) []text {
	if list == nil {
		return nil
	}
	out := make([]text, 0, len(list))
	for _, t := range list {
		s, err := substitute(t.s, vars)
		if err != nil {
			p.refError(t.line, fmt.Sprintf("job %q", e.id.s), field, err, p.defines(e))
			continue
		}
		if s == "" {
			p.fail(t.line, "job %q: %s: %q is empty after substitution", e.id.s, field, t.s)
			continue
		}
		out = append(out, text{s, t.line})
	}
	return out
}

// paths substitutes vars into the inputs or outputs entries list of e and
// checks them: a pattern must be valid, and an output must not name the
// workflow's folder or one above it. It returns them without duplicates,
// as strings and with their lines, leaving out those with a mistake.
func (p *parser) paths(list []text, vars scope, e *entry, field string) ([]string, []text) {
	if list == nil {
		return nil, nil
	}
	strs := make([]string, 0, len(list))
	texts := make([]text, 0, len(list))
	var seen map[string]bool // only for long lists
	if len(list) > 8 {
		seen = make(map[string]bool, len(list))
	}
	for _, t := range p.substituteAll(list, vars, e, field) {
		if _, err := filepath.Match(t.s, ""); err != nil {
			p.fail(t.line, "job %q: %s %q: bad pattern (write \\[ for a [ in a name)", e.id.s, field, t.s)
			continue
		}
		if field == "outputs" {
			if why := p.confine(t.s); why != "" {
				p.fail(t.line, "job %q: outputs %q: %s", e.id.s, t.s, why)
				continue
			}
		}
		if seen[t.s] || seen == nil && slices.Contains(strs, t.s) {
			continue
		}
		if seen != nil {
			seen[t.s] = true
		}
		strs = append(strs, t.s)
		texts = append(texts, t)
	}
	return strs, texts
}

// defines says which variables e defines, for errors about unknown ones.
func (e *entry) defines() string {
	if len(e.vars) == 0 {
		return " (the job has no foreach)"
	}
	names := make([]string, len(e.vars))
	for i, v := range e.vars {
		names[i] = v.name
	}
	return " (foreach defines " + strings.Join(names, ", ") + ")"
}

// defines says which variables the jobs of e see, for errors about
// unknown ones: those of e's foreach and the workflow's.
func (p *parser) defines(e *entry) string {
	return e.defines() + p.globalsDefined()
}

// describeVars writes a job's foreach values as "i=1 k=a", in the order
// of e's foreach.
func (e *entry) describeVars(values []string) string {
	var b strings.Builder
	for i, v := range e.vars {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(v.name)
		b.WriteByte('=')
		b.WriteString(values[i])
	}
	return b.String()
}

// substError is an unknown or unclosed ${...} reference.
type substError struct {
	ref   string // as written: "${j}", or "${j..." to the end if unclosed
	shell bool   // in a run command
}

// unknown reports whether e is a reference to an unknown variable.
func (e *substError) unknown() bool {
	return strings.HasSuffix(e.ref, "}") && (e.shell || !strings.HasSuffix(e.ref, ":raw}"))
}

func (e *substError) Error() string {
	switch {
	case !strings.HasSuffix(e.ref, "}"):
		return fmt.Sprintf("unclosed %q", e.ref)
	case !e.unknown():
		return e.ref + ": only a run command takes :raw (shell text)"
	}
	return "unknown variable " + e.ref
}

// refError reports the error of substitute in field of the job or item
// called name; defines says which variables there are.
func (p *parser) refError(line int, name, field string, err error, defines string) {
	msg := fmt.Sprintf("%s: %s: %v", name, field, err)
	se, ok := err.(*substError)
	if !ok || !se.unknown() {
		p.fail(line, "%s", msg)
		return
	}
	msg += defines
	if se.shell && !strings.HasSuffix(se.ref, ":raw}") {
		v := se.ref[2 : len(se.ref)-1]
		msg += fmt.Sprintf("; for a shell variable write $%s or $%s", v, se.ref)
	}
	p.fail(line, "%s", msg)
}

// lookup returns the value of the reference ref, the text between ${
// and }: vars[ref], or a part of the value of a variable, as in
// ${f.stem} (see derived).
func lookup(vars scope, ref string) (string, bool) {
	if v, ok := vars.get(ref); ok {
		return v, true
	}
	name, suffix, ok := strings.Cut(ref, ".")
	if !ok {
		return "", false
	}
	v, ok := vars.get(name)
	if !ok {
		return "", false
	}
	return derived(v, suffix)
}

// A scope is the variables a text sees: the foreach values of a job
// (names and values, in the order of its entry's foreach), and the
// workflow's own (vars: and --set). A foreach variable never has the name
// of one of the workflow's (see clash).
type scope struct {
	names, values []string
	globals       map[string]string
}

func (s scope) get(name string) (string, bool) {
	for i, n := range s.names {
		if n == name {
			return s.values[i], true
		}
	}
	v, ok := s.globals[name]
	return v, ok
}

// globalScope is the scope of a text of the workflow's, outside any job.
func (p *parser) globalScope() scope { return scope{globals: p.globals} }

// substitute replaces every ${name} in s, an id, a path, an after or
// needs entry, a foreach value or workdir, by vars[name], and every
// ${name.stem}, ${name.name} and ${name.dir} by that part of it, as
// text. Every ${...} is a reference: an unknown or unclosed one is an
// error, and so is one with :raw, which only run commands take (see
// substituteRun).
func substitute(s string, vars scope) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		rest := s[i:]
		if !strings.HasPrefix(rest, "${") {
			b.WriteByte(rest[0])
			i++
			continue
		}
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			return "", &substError{ref: rest}
		}
		v, ok := lookup(vars, rest[2:end])
		if !ok {
			return "", &substError{ref: rest[:end+1]}
		}
		b.WriteString(v)
		i += end + 1
	}
	return b.String(), nil
}
