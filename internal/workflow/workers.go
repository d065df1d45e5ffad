package workflow

import (
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// This file reads the workers mapping: the persistent worker programs
// that jobs with worker: send requests to (docs/WORKERS.md).

// A Worker is a persistent worker program of the workflow's workers
// field: jobs with its name in their worker field are requests to it.
type Worker struct {
	Name string // as written; valid as an item name is
	// Run is the program's command line, with the workflow's variables
	// substituted (quoted as in a job's run); running the workflow
	// appends --persistent_worker.
	Run string
	// Env holds the entry's env field as KEY=value entries, sorted by
	// KEY; nil if none. The values have the workflow's variables
	// substituted.
	Env  []string
	Line int // line of the program's name
}

// workers reads the workers mapping, leaving out the programs with
// mistakes; every name written goes into p.programs, good or not.
func (p *parser) workers(f *field) []*Worker {
	p.programs = map[string]*Worker{}
	n := f.value
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.fail(n.Line, "workers must be a mapping of program names to programs, not %s", describe(n))
		p.programsLost = true
		return nil
	}
	fields, _ := p.fields(n, "workers")
	var out []*Worker
	for _, f := range fields {
		p.programs[f.key] = nil
		if w := p.worker(f); w != nil {
			p.programs[f.key] = w
			out = append(out, w)
		}
	}
	return out
}

// worker reads one program; it returns nil if it has a mistake.
func (p *parser) worker(f field) *Worker {
	w := &Worker{Name: f.key, Line: f.keyLine}
	if !p.validName("worker", w.Name, w.Line) {
		return nil
	}
	name := fmt.Sprintf("worker %q", w.Name)
	n := f.value
	if isNull(n) || n.Kind != yaml.MappingNode {
		p.fail(n.Line, "%s must be a mapping with run (and env), not %s", name, describe(n))
		return nil
	}
	fields, ok := p.fields(n, name)
	var run *text
	for _, f := range fields {
		switch f.key {
		case "run":
			if run = p.command(f, name); run == nil {
				ok = false
			}
		case "env":
			if w.Env, ok = p.workerEnv(f, name); !ok {
				return nil
			}
		default:
			p.fail(f.keyLine, "%s: unknown field %q (a worker has run and env)", name, f.key)
			ok = false
		}
	}
	if run == nil {
		if ok {
			p.fail(w.Line, "%s has no run command", name)
		}
		return nil
	}
	if !ok {
		return nil
	}
	s, err := substituteRun(run.s, p.globalScope())
	if err != nil {
		p.refError(run.line, name, "run", err, " (a worker has no foreach)"+p.globalsDefined())
		return nil
	}
	w.Run = s
	return w
}

// workerEnv reads the env field f of the program called name: a mapping
// of variable names to strings.
func (p *parser) workerEnv(f field, name string) ([]string, bool) {
	n := f.value
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		p.fail(n.Line, "%s: env must be a mapping of variable names to strings, not %s", name, describe(n))
		return nil, false
	}
	fields, ok := p.fields(n, name+": env")
	env := make([]string, 0, len(fields))
	for _, f := range fields {
		if !validEnvVar(f.key) {
			p.fail(f.keyLine, "%s: env: %q is not a variable name: use letters, digits and _, not starting with a digit", name, f.key)
			ok = false
			continue
		}
		if f.value.Kind != yaml.ScalarNode || isNull(f.value) {
			p.fail(f.value.Line, "%s: env: %s must be a string, not %s", name, f.key, describe(f.value))
			ok = false
			continue
		}
		v, good := p.substituteGlobals(f.value.Value, f.value.Line, name+": env: "+f.key)
		if !good {
			ok = false
			continue
		}
		env = append(env, f.key+"="+v)
	}
	sort.Strings(env)
	return env, ok
}

// validName reports whether name is valid for an item or a program
// (kind), and reports it at line if not.
func (p *parser) validName(kind, name string, line int) bool {
	if validItemName(name) {
		return true
	}
	p.fail(line, "%s name %q is not valid: start with a letter or digit, then use letters, digits, _ - and .", kind, name)
	return false
}

// validEnvVar reports whether s is a portable environment variable name.
func validEnvVar(s string) bool {
	if s == "" || '0' <= s[0] && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != '_' {
			return false
		}
	}
	return true
}

// program checks the worker field of a job or an item called name, at
// line: it returns the program's name, or "" after reporting one that
// is not defined (unless its definition had a mistake of its own).
func (p *parser) program(t text, name string) string {
	w, written := p.programs[t.s]
	switch {
	case w != nil:
		return t.s
	case !written && !p.programsLost:
		p.fail(t.line, "%s: worker %q: no such program in workers%s", name, t.s, p.programNames())
	}
	return ""
}

// programNames lists the programs of workers, for the error about
// another.
func (p *parser) programNames() string {
	names := make([]string, 0, len(p.programs))
	for n, w := range p.programs {
		if w != nil {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return " (the workflow defines none)"
	}
	sort.Strings(names)
	return " (it defines " + strings.Join(names, ", ") + ")"
}

// programField reads the worker field f of the job or item called name:
// a program's name, as a string. It returns nil if the field has a
// mistake.
func (p *parser) programField(f field, name string) *text {
	n := f.value
	if n.Kind != yaml.ScalarNode || isNull(n) || n.Value == "" {
		p.fail(n.Line, "%s: worker must be the name of a program of workers, not %s", name, describe(n))
		return nil
	}
	return &text{n.Value, n.Line}
}

// substituteArgs substitutes vars into e's args, reporting the ones with
// a mistake and leaving them out. Unlike a command's, an argument's
// values are not quoted: it is one word as it stands.
func (p *parser) substituteArgs(e *entry, vars scope) []string {
	if e.args == nil {
		return nil
	}
	out := make([]string, 0, len(e.args))
	for _, t := range e.args {
		s, err := substitute(t.s, vars)
		if err != nil {
			p.refError(t.line, fmt.Sprintf("job %q", e.id.s), "args", err, p.defines(e))
			continue
		}
		out = append(out, s)
	}
	return out
}
