package workflow

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// This file names the files poolrun keeps beside a workflow file, and
// finds the files that an input or output pattern matches.

// StateFile returns the path of the state file of the workflow file at
// path: ".NAME.poolrun-state" in the same folder, where NAME is the
// workflow file's name. Running a workflow records there what its jobs
// made; no output may match it.
func StateFile(path string) string { return ownFile(path, "state") }

// LockFile returns the path of the lock file of the workflow file at
// path: ".NAME.poolrun-lock" in the same folder. It exists while a run of
// the workflow holds it; no output may match it.
func LockFile(path string) string { return ownFile(path, "lock") }

func ownFile(path, kind string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".poolrun-"+kind)
}

// matchName reports whether the file name name matches pattern, as
// [path/filepath.Match] does, except that a name that begins with a dot
// matches only a pattern that begins with one, as in the shell: "*" does
// not match ".git". A malformed pattern matches nothing.
func matchName(pattern, name string) bool {
	if strings.HasPrefix(name, ".") && !strings.HasPrefix(pattern, ".") {
		return false
	}
	ok, _ := filepath.Match(pattern, name)
	return ok
}

// Glob returns the names of the files and folders that pattern matches,
// in lexical order, as [path/filepath.Glob] does but with the shell's
// rule for names that begin with a dot, in every part of the path: such a
// name matches only a pattern that begins with a dot ("*" does not match
// ".git").
// Folders that cannot be read are passed over; a malformed pattern
// matches nothing.
func Glob(pattern string) []string {
	if !IsPattern(pattern) {
		if _, err := os.Lstat(pattern); err != nil {
			return nil
		}
		return []string{pattern}
	}
	start := ""
	rest := pattern
	if filepath.IsAbs(pattern) {
		start, rest = string(filepath.Separator), strings.TrimLeft(pattern, string(filepath.Separator))
	}
	parts := strings.Split(rest, string(filepath.Separator))
	var out []string
	glob(start, parts, &out)
	return out
}

// glob appends to out the paths below dir ("" for the current folder)
// that the parts of a pattern, one per level, match.
func glob(dir string, parts []string, out *[]string) {
	for len(parts) > 0 && (parts[0] == "" || parts[0] == ".") {
		parts = parts[1:] // "a//b", "./a"
	}
	if len(parts) == 0 {
		*out = append(*out, filepath.Clean(dir))
		return
	}
	part, rest := parts[0], parts[1:]
	if !IsPattern(part) || part == ".." {
		next := filepath.Join(dir, part)
		if dir == "" {
			next = part
		}
		if _, err := os.Lstat(next); err != nil {
			return
		}
		if len(rest) > 0 {
			if fi, err := os.Stat(next); err != nil || !fi.IsDir() {
				return
			}
		}
		glob(next, rest, out)
		return
	}
	read := dir
	if read == "" {
		read = "."
	}
	entries, err := os.ReadDir(read) // sorted by name
	if err != nil {
		return
	}
	for _, e := range entries {
		if !matchName(part, e.Name()) {
			continue
		}
		next := filepath.Join(dir, e.Name())
		if len(rest) > 0 {
			if fi, err := os.Stat(next); err != nil || !fi.IsDir() {
				continue
			}
		}
		glob(next, rest, out)
	}
}

// confine says why the output o (substituted) of a job may not be one,
// "" when it may: a failed job's outputs are removed, so an output must lie
// inside the working folder (the workflow's folder or its workdir), below
// it, and must not match the workflow file, poolrun's own files beside it,
// nor reach into a .git folder.
func (p *parser) confine(o string) string {
	where := "the workflow's folder"
	if p.workdir != p.dir {
		where = "the workflow's workdir"
	}
	rel := filepath.Clean(o)
	switch {
	case !filepath.IsAbs(rel) && !outside(rel):
		// Relative to the working folder, and inside it, as written.
	case p.workdir != "":
		abs := rel
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(p.workdir, rel)
		}
		r, err := filepath.Rel(p.workdir, abs)
		if err != nil || outside(r) {
			return fmt.Sprintf("it is %s, outside %s %s: outputs must lie inside it", abs, where, p.workdir)
		}
		rel = r
	default:
		return "it lies outside " + where + ": outputs must lie inside it"
	}
	if rel == "." {
		return where + " itself cannot be an output"
	}
	for part := range strings.SplitSeq(rel, string(filepath.Separator)) {
		if matchName(part, ".git") {
			return "it would reach into a .git folder"
		}
	}
	if why := p.resolvedOutside(rel, where); why != "" {
		return why
	}
	for _, own := range p.ownFiles() {
		if matchParts(rel, own.parts) {
			return fmt.Sprintf("it would match %s %s", own.what, filepath.Base(own.path))
		}
	}
	return ""
}

// resolvedOutside says why the output at rel, relative to the working
// folder, leads out of it through a symbolic link, "" when it does not:
// the folder it lies in (up to its first pattern part), with every link
// followed as far as it exists, must lie inside the working folder as
// resolved. The output itself may be a link: it is removed, never what it
// points to. Each folder is looked at once per parse.
func (p *parser) resolvedOutside(rel, where string) string {
	if p.workdir == "" {
		return ""
	}
	sep := string(filepath.Separator)
	end := len(rel)
	if i := strings.IndexAny(rel, `*?[\`); i >= 0 {
		end = i
	}
	folder := ""
	if j := strings.LastIndex(rel[:end], sep); j >= 0 {
		folder = rel[:j]
	}
	why, known := p.outsideWhy[folder]
	if !known {
		root, err := p.realPath(p.workdir)
		if err != nil {
			return ""
		}
		why = p.linkedOutside(filepath.Join(p.workdir, folder), folder, root, where)
		if p.outsideWhy == nil {
			p.outsideWhy = make(map[string]string)
		}
		p.outsideWhy[folder] = why
	}
	return why
}

// linkedOutside is resolvedOutside for the folder dir (absolute; rel
// relative to the working folder, whose links followed are root).
func (p *parser) linkedOutside(dir, rel, root, where string) string {
	var rest []string
	for dir != p.workdir {
		if _, err := os.Lstat(dir); err == nil {
			break
		}
		rest = append([]string{filepath.Base(dir)}, rest...)
		dir = filepath.Dir(dir)
	}
	real, err := p.realPath(dir)
	if err != nil {
		return ""
	}
	if r, err := filepath.Rel(root, real); err != nil || outside(r) {
		shown := filepath.Join(append([]string{real}, rest...)...)
		return fmt.Sprintf("its folder %s is %s once links are followed, outside %s %s: outputs must lie inside it", rel, shown, where, root)
	}
	return ""
}

// realPath returns dir with every symbolic link followed
// (filepath.EvalSymlinks), once per folder for a parse.
func (p *parser) realPath(dir string) (string, error) {
	if r, ok := p.resolved[dir]; ok {
		return r, nil
	}
	r, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	if p.resolved == nil {
		p.resolved = make(map[string]string)
	}
	p.resolved[dir] = r
	return r, nil
}

// outside reports whether the clean relative path rel leads out of its
// folder.
func outside(rel string) bool {
	return rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// ownEntry is one of the workflow's own files, as confine checks that no
// output can match it: its path (relative to the current folder) and
// its parts relative to the working folder.
type ownEntry struct {
	path, what string
	parts      []string
}

// ownFiles returns the workflow's own files that lie in the working
// folder, once per parse.
func (p *parser) ownFiles() []ownEntry {
	if p.ownFound {
		return p.own
	}
	var own []ownEntry
	for _, f := range []ownEntry{
		{path: p.file, what: "the workflow file"},
		{path: StateFile(p.file), what: "the workflow's state file"},
		{path: LockFile(p.file), what: "the workflow's lock file"},
	} {
		rel := filepath.Base(f.path)
		if p.workdir != "" {
			abs, err := filepath.Abs(f.path)
			if err != nil {
				continue
			}
			if rel, err = filepath.Rel(p.workdir, abs); err != nil || outside(rel) {
				continue
			}
		}
		f.parts = strings.Split(rel, string(filepath.Separator))
		own = append(own, f)
	}
	p.own, p.ownFound = own, true
	return own
}

// matchParts reports whether the output at rel, relative to the working
// folder, could match the file whose parts are parts: part by part.
func matchParts(rel string, parts []string) bool {
	i := 0
	for part := range strings.SplitSeq(rel, string(filepath.Separator)) {
		if i == len(parts) || !matchName(part, parts[i]) {
			return false
		}
		i++
	}
	return i == len(parts)
}

// Matches reports whether path matches pattern part by part, as [Glob]
// matches files: names that begin with a dot only where the pattern's
// part does. A pattern without pattern characters matches itself alone.
func Matches(pattern, path string) bool {
	if !IsPattern(pattern) {
		return filepath.Clean(pattern) == filepath.Clean(path)
	}
	return matchPath(filepath.Clean(pattern), filepath.Clean(path))
}
