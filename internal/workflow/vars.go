package workflow

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// This file reads the workflow's own variables (vars: and Options.Set),
// its working folder (workdir:), and the values of a foreach variable
// that is a glob of files.

// Options say what a caller adds to a workflow file when it reads it.
type Options struct {
	// Set holds variables given on the command line (poolrun run --set
	// NAME=VALUE): each overrides the variable of the file's vars: of the
	// same name, or adds one that the file uses as ${NAME} without giving
	// it a value. nil sets none.
	Set map[string]string
}

// readVars reads the vars field f (nil if the file has none) and
// p.set into p.globals. data is the whole file: a variable of --set must
// be in vars: or written ${NAME} somewhere in it, so that a mistyped name
// is not silently of no effect.
func (p *parser) readVars(f *field, data []byte) {
	var fields []field
	if f != nil && !isNull(f.value) {
		if f.value.Kind != yaml.MappingNode {
			p.fail(f.value.Line, "vars must map variable names to values, not %s", describe(f.value))
		} else {
			fields, _ = p.fields(f.value, "vars")
		}
	}
	if len(fields) == 0 && len(p.set) == 0 {
		return
	}
	p.globals = make(map[string]string, len(fields)+len(p.set))
	p.varLine = make(map[string]int, len(fields)+len(p.set))
	for _, f := range fields {
		if !validVar(f.key) {
			p.fail(f.keyLine, "vars: variable %q is not valid: start with a-z, then use a-z, 0-9 and _", f.key)
			continue
		}
		n := f.value
		if n.Kind != yaml.ScalarNode || isNull(n) {
			p.fail(n.Line, "vars: variable %q must be a string, not %s", f.key, describe(n))
			continue
		}
		p.globals[f.key] = n.Value
		p.varLine[f.key] = f.keyLine
	}
	names := make([]string, 0, len(p.set))
	for name := range p.set {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		switch _, declared := p.varLine[name]; {
		case !validVar(name):
			p.failArg("--set %s: not a valid variable name: start with a-z, then use a-z, 0-9 and _", name)
			continue
		case !declared && !bytes.Contains(data, []byte("${"+name+"}")) && !bytes.Contains(data, []byte("${"+name+".")) &&
			!bytes.Contains(data, []byte("${"+name+":raw}")):
			p.failArg("--set %s: the workflow has no variable %s: it is neither in vars: nor used as ${%s}%s", name, name, name, p.globalsDefined())
			continue
		}
		p.globals[name] = p.set[name]
		if _, ok := p.varLine[name]; !ok {
			p.varLine[name] = 0
		}
	}
}

// failArg reports a mistake of Options.Set, which has no line.
func (p *parser) failArg(format string, args ...any) {
	if len(p.errs) == MaxErrors {
		p.more++
		return
	}
	p.errs = append(p.errs, &Error{File: p.file, Msg: fmt.Sprintf(format, args...)})
}

// clash says what else the foreach variable name is, "" if nothing: a
// variable of vars: or of --set.
func (p *parser) clash(name string) string {
	line, ok := p.varLine[name]
	switch {
	case !ok:
		return ""
	case line == 0:
		return "a variable of --set"
	}
	return fmt.Sprintf("a variable of vars: (line %d)", line)
}

// substituteGlobals substitutes the workflow's variables into s, a foreach
// value or workdir at line, called what in errors; false if s refers to
// an unknown variable (reported).
func (p *parser) substituteGlobals(s string, line int, what string) (string, bool) {
	out, err := substitute(s, p.globalScope())
	if err != nil {
		defined := p.globalsDefined()
		if defined == "" {
			defined = " (the workflow has no vars:)"
		}
		p.fail(line, "%s: %v%s", what, err, defined)
		return "", false
	}
	return out, true
}

// globalsDefined says which variables vars: and --set define, for errors
// about unknown ones; "" if none.
func (p *parser) globalsDefined() string {
	if len(p.globals) == 0 {
		return ""
	}
	names := make([]string, 0, len(p.globals))
	for name := range p.globals {
		names = append(names, name)
	}
	slices.Sort(names)
	return " (vars: defines " + strings.Join(names, ", ") + ")"
}

// readWorkdir reads the workdir field f (nil if the file has none) into
// p.workdir: a folder relative to the workflow file's, or absolute, that
// must exist. Without the field it is the workflow file's folder.
func (p *parser) readWorkdir(f *field) {
	p.workdir = p.dir
	if f == nil {
		return
	}
	n := f.value
	if n.Kind != yaml.ScalarNode || isNull(n) || n.Value == "" {
		p.fail(n.Line, "workdir must be a folder, not %s", describe(n))
		return
	}
	dir, ok := p.substituteGlobals(n.Value, n.Line, "workdir")
	if !ok {
		return
	}
	if !filepath.IsAbs(dir) {
		if p.dir == "" {
			p.fail(n.Line, "workdir %q: the workflow file's folder is unknown", dir)
			return
		}
		dir = filepath.Join(p.dir, dir)
	}
	dir = filepath.Clean(dir)
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		p.fail(n.Line, "workdir %s: %v", dir, unwrapPath(err))
		p.workdir = ""
		return
	case !fi.IsDir():
		p.fail(n.Line, "workdir %s is not a folder", dir)
		p.workdir = ""
		return
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil && real == string(filepath.Separator) {
		// Outputs are confined to the working folder: the root confines nothing.
		p.fail(n.Line, "workdir %s is the root folder: outputs must lie inside the working folder, and a failed job's are removed", dir)
		p.workdir = ""
		return
	}
	p.workdir = dir
}

// unwrapPath returns the error inside a *os.PathError, whose message
// repeats the path.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// globValues returns the files and folders that the glob pattern (a
// foreach value, at line, called what in errors) matches, relative to the
// working folder as the pattern is (absolute if it is), in lexical order:
// at least one, at most MaxJobs.
func (p *parser) globValues(pattern string, line int, what string) ([]string, bool) {
	if _, err := filepath.Match(pattern, ""); err != nil {
		p.fail(line, "%s: %q: bad pattern (write \\[ for a [ in a name)", what, pattern)
		return nil, false
	}
	full := pattern
	if !filepath.IsAbs(pattern) && p.workdir != "" {
		full = EscapePattern(p.workdir) + string(filepath.Separator) + pattern
	}
	matches := Glob(full)
	switch {
	case len(matches) == 0:
		where := ""
		if !filepath.IsAbs(pattern) && p.workdir != "" {
			where = " in " + p.workdir
		}
		p.fail(line, "%s: no file matches %q%s", what, pattern, where)
		return nil, false
	case len(matches) > limits.jobs:
		p.fail(line, "%s: %q matches more than %d files", what, pattern, limits.jobs)
		return nil, false
	}
	if full != pattern {
		for i, m := range matches {
			if rel, err := filepath.Rel(p.workdir, m); err == nil {
				matches[i] = rel
			}
		}
	}
	return matches, true
}

// EscapePattern escapes the characters of s that filepath.Match would take
// for a pattern.
func EscapePattern(s string) string {
	if !IsPattern(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// derived returns the part of value that the suffix of a reference
// ${name.suffix} asks for: stem (the base name without its last
// extension), name (the base name) or dir (the folder); false for
// another suffix.
func derived(value, suffix string) (string, bool) {
	switch suffix {
	case "stem":
		base := filepath.Base(value)
		if stem := strings.TrimSuffix(base, filepath.Ext(base)); stem != "" {
			return stem, true
		}
		return base, true
	case "name":
		return filepath.Base(value), true
	case "dir":
		return filepath.Dir(value), true
	}
	return "", false
}

// validRef reports whether ref, the text between ${ and } of a run
// command, is a variable name, possibly followed by .stem, .name or .dir,
// then possibly by :raw.
func validRef(ref string) bool {
	ref, _ = strings.CutSuffix(ref, ":raw")
	name, suffix, ok := strings.Cut(ref, ".")
	if !ok {
		return validVar(ref)
	}
	_, known := derived("", suffix)
	return validVar(name) && known
}
