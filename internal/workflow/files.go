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
	if !isPattern(pattern) {
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
	if !isPattern(part) || part == ".." {
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
// inside the workflow's folder, below it, and must not match the workflow
// file, poolrun's own files beside it, nor reach into a .git folder.
func (p *parser) confine(o string) string {
	rel := filepath.Clean(o)
	if p.dir != "" {
		abs := rel
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(p.dir, rel)
		}
		r, err := filepath.Rel(p.dir, abs)
		if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			return fmt.Sprintf("it is %s, outside the workflow's folder %s: outputs must lie inside it", abs, p.dir)
		}
		rel = r
	} else if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "it lies outside the workflow's folder: outputs must lie inside it"
	}
	if rel == "." {
		return "the workflow's folder itself cannot be an output"
	}
	parts := strings.Split(rel, string(filepath.Separator))
	for _, part := range parts {
		if matchName(part, ".git") {
			return "it would reach into a .git folder"
		}
	}
	if len(parts) == 1 {
		base := filepath.Base(p.file)
		for _, own := range []struct{ name, what string }{
			{base, "the workflow file"},
			{filepath.Base(StateFile(base)), "the workflow's state file"},
			{filepath.Base(LockFile(base)), "the workflow's lock file"},
		} {
			if matchName(parts[0], own.name) {
				return fmt.Sprintf("it would match %s %s", own.what, own.name)
			}
		}
	}
	return ""
}
