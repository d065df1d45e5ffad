package workflow

import (
	"fmt"
	"strings"
)

// This file expands foreach entries into jobs and substitutes ${name}.

// job is a Job being built, with the lines that errors about it need.
type job struct {
	*Job
	idLine int
	entry  *entry
	after  []text // substituted, not yet resolved
	needs  []text // substituted, not yet checked
}

// expand turns entries into jobs, in file order, refusing bad and
// duplicate ids.
func (p *parser) expand(entries []*entry) ([]*job, error) {
	var jobs []*job
	byID := make(map[string]*job)
	deps, size := 0, 0 // after and needs entries, bytes of ids and commands
	for _, e := range entries {
		name := fmt.Sprintf("job %q", e.id.s)
		count := e.count()
		if len(jobs)+count > MaxJobs {
			return nil, p.errorf(e.line, "%s: the workflow has more than %d jobs", name, MaxJobs)
		}
		// Aliases can repeat a long list in every entry, and foreach a long
		// command in every job: count before copying.
		if deps += count * (len(e.after) + len(e.needs)); deps > MaxDependencies {
			return nil, p.errorf(e.line, "%s: the workflow has more than %d dependencies", name, MaxDependencies)
		}
		if count*(len(e.id.s)+len(e.run.s)) > maxText-size {
			return nil, p.errorf(e.line, "%s: the workflow's ids and commands come to more than %d MiB", name, maxText>>20)
		}
		idx := make([]int, len(e.vars)) // odometer over the values, first variable outermost
		for range count {
			var vars map[string]string
			if len(e.vars) > 0 {
				vars = make(map[string]string, len(e.vars))
				for i, v := range e.vars {
					vars[v.name] = v.values[idx[i]]
				}
			}
			j, err := p.instance(e, name, vars)
			if err != nil {
				return nil, err
			}
			if first := byID[j.ID]; first != nil {
				if first.entry == e {
					return nil, p.errorf(e.id.line, "%s: foreach gives the id %q twice (%s and %s)",
						name, j.ID, e.describeVars(first.Vars), e.describeVars(vars))
				}
				return nil, p.errorf(j.idLine, "duplicate job id %q (first at line %d)", j.ID, first.idLine)
			}
			if size += len(j.ID) + len(j.Run); size > maxText {
				return nil, p.errorf(e.line, "%s: the workflow's ids and commands come to more than %d MiB", name, maxText>>20)
			}
			byID[j.ID] = j
			jobs = append(jobs, j)
			for i := len(idx) - 1; i >= 0; i-- {
				if idx[i]++; idx[i] < len(e.vars[i].values) {
					break
				}
				idx[i] = 0
			}
		}
	}
	return jobs, nil
}

// maxText bounds the bytes of all ids and run commands after foreach
// expansion, which can multiply a long command by MaxJobs.
const maxText = 256 << 20

// instance makes the job of entry e, called name in errors, for one
// combination of foreach values.
func (p *parser) instance(e *entry, name string, vars map[string]string) (*job, error) {
	j := &job{
		Job:    &Job{Line: e.line, Vars: vars, Timeout: e.limit},
		idLine: e.id.line,
		entry:  e,
	}
	var err error
	if j.ID, err = substitute(e.id.s, vars, false); err != nil {
		return nil, p.refError(e.id.line, name, "id", err, e.defines())
	}
	if !validID(j.ID) {
		what := ""
		if vars != nil {
			what = " (" + e.describeVars(vars) + ")"
		}
		return nil, p.errorf(e.id.line, "job id %q%s is not valid: use letters, digits and %s", j.ID, what, idPunct)
	}
	if j.Run, err = substitute(e.run.s, vars, true); err != nil {
		return nil, p.refError(e.run.line, name, "run", err, e.defines())
	}
	if j.after, err = p.substituteAll(e.after, vars, e, "after"); err != nil {
		return nil, err
	}
	if j.needs, err = p.substituteAll(e.needs, vars, e, "needs"); err != nil {
		return nil, err
	}
	return j, nil
}

// substituteAll substitutes vars into the after or needs entries list of e.
func (p *parser) substituteAll(list []text, vars map[string]string, e *entry, field string) ([]text, error) {
	if list == nil {
		return nil, nil
	}
	out := make([]text, len(list))
	for i, t := range list {
		s, err := substitute(t.s, vars, false)
		if err != nil {
			return nil, p.refError(t.line, fmt.Sprintf("job %q", e.id.s), field, err, e.defines())
		}
		if s == "" {
			return nil, p.errorf(t.line, "job %q: %s: %q is empty after substitution", e.id.s, field, t.s)
		}
		out[i] = text{s, t.line}
	}
	return out, nil
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

// describeVars writes vars as "i=1 k=a", in the order of e's foreach.
func (e *entry) describeVars(vars map[string]string) string {
	var b strings.Builder
	for i, v := range e.vars {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(v.name)
		b.WriteByte('=')
		b.WriteString(vars[v.name])
	}
	return b.String()
}

// substError is an unknown or unclosed ${...} reference.
type substError struct {
	ref   string // as written: "${j}", or "${j..." to the end if unclosed
	shell bool   // in a run command
}

func (e *substError) Error() string {
	if !strings.HasSuffix(e.ref, "}") {
		return fmt.Sprintf("unclosed %q", e.ref)
	}
	return "unknown variable " + e.ref
}

// refError reports the error of substitute in field of the job or item
// called name; defines says which variables there are.
func (p *parser) refError(line int, name, field string, err error, defines string) error {
	msg := fmt.Sprintf("%s: %s: %v", name, field, err)
	se, ok := err.(*substError)
	if !ok || !strings.HasSuffix(se.ref, "}") {
		return p.errorf(line, "%s", msg)
	}
	msg += defines
	if se.shell {
		v := se.ref[2 : len(se.ref)-1]
		msg += fmt.Sprintf("; for a shell variable write $%s or $%s", v, se.ref)
	}
	return p.errorf(line, "%s", msg)
}

// substitute replaces every ${name} in s by vars[name].
//
// In a run command (shell is true), only ${name} with a valid variable
// name is a reference; every other use of $ is left for the shell, except
// that $${ becomes ${. Elsewhere, every ${...} is a reference. An unknown or
// unclosed reference is an error.
func substitute(s string, vars map[string]string, shell bool) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		rest := s[i:]
		switch {
		case rest[0] != '$':
			b.WriteByte(rest[0])
			i++
			continue
		case shell && strings.HasPrefix(rest, "$${"):
			b.WriteString("${")
			i += 3
			continue
		case shell && strings.HasPrefix(rest, "$$"):
			b.WriteString("$$")
			i += 2
			continue
		case !strings.HasPrefix(rest, "${"):
			b.WriteByte('$')
			i++
			continue
		}
		end := strings.IndexByte(rest, '}')
		if shell && (end < 0 || !validVar(rest[2:end])) {
			b.WriteString("${")
			i += 2
			continue
		}
		if end < 0 {
			return "", &substError{ref: rest}
		}
		v, ok := vars[rest[2:end]]
		if !ok {
			return "", &substError{ref: rest[:end+1], shell: shell}
		}
		b.WriteString(v)
		i += end + 1
	}
	return b.String(), nil
}
