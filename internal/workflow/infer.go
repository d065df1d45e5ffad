package workflow

import (
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// This file infers dependencies from files, as make does: a job whose
// input is another job's output runs after it.
//
// An input is compared with the outputs that are paths, never with output
// patterns: a pattern says which files a job may write, not which it
// writes, and two patterns cannot be compared at all. A path input
// matches the output that is the same path once both are made absolute
// against the working folder and cleaned; a pattern input matches every
// output path it matches, part by part, names that begin with a dot only
// where the pattern's part does (as [Glob] matches files).

// pathKey returns the input or output path s as inferred dependencies
// compare it: absolute against the working folder, cleaned.
func (p *parser) pathKey(s string) string {
	if filepath.IsAbs(s) || p.workdir == "" {
		return filepath.Clean(s)
	}
	return filepath.Join(p.workdir, s)
}

// patternKey is pathKey for an input pattern: the working folder's name
// escaped, should it hold pattern characters.
func (p *parser) patternKey(s string) string { return absPattern(p.workdir, s) }

// absPattern returns the path or pattern s, relative to the folder dir
// or absolute, as an absolute pattern: dir escaped, then s, cleaned; s
// cleaned alone when dir is "".
func absPattern(dir, s string) string {
	if filepath.IsAbs(s) || dir == "" {
		return filepath.Clean(s)
	}
	return filepath.Clean(EscapePattern(dir) + string(filepath.Separator) + s)
}

// infer adds to deps (see dependencies) the jobs that each job runs after
// because one of its inputs is their output, and returns, for each job,
// those that deps did not hold already, each with the input, as written,
// that made it: nil for a job without any. It stops at a limit (p.stop).
func (p *parser) infer(jobs []*job, deps [][]int) []map[int]string {
	producer := p.producers                  // expand's: each output path's job
	keys := make([]string, 0, len(producer)) // of producer, sorted, for input patterns
	for k := range producer {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	p.made = outputKeys{producer, keys} // for overlaps
	if len(producer) == 0 {
		return nil
	}
	budget := matchBudget
	matched := make(map[string][]int) // input pattern key -> the jobs whose outputs it matches
	inferred := make([]map[int]string, len(jobs))
	mark := make([]int, len(jobs)) // mark[k] == i+1: k is in deps[i]
	total := 0
	for i, j := range jobs {
		if len(j.Inputs) == 0 {
			continue
		}
		for _, k := range deps[i] {
			mark[k] = i + 1
		}
		for _, in := range j.Inputs {
			var found []int
			if !IsPattern(in) {
				if k, ok := producer[p.pathKey(in)]; ok {
					found = []int{k}
				}
			} else {
				pattern := p.patternKey(in)
				var ok bool
				if found, ok = matched[pattern]; !ok {
					prefix := pattern
					if n := strings.IndexAny(pattern, `*?[\`); n >= 0 {
						prefix = pattern[:n]
					}
					start := sort.SearchStrings(keys, prefix)
					for _, k := range keys[start:] {
						if !strings.HasPrefix(k, prefix) {
							break
						}
						if budget--; budget < 0 {
							p.limit(j.Line, "job %q: inputs %q: the inputs patterns of this workflow take too long to match against the outputs; give them a fixed start, as in \"out/chunk-*\"", j.ID, in)
							return inferred
						}
						if matchPath(pattern, k) {
							found = append(found, producer[k])
						}
					}
					matched[pattern] = found
				}
			}
			for _, k := range found {
				if k == i || mark[k] == i+1 {
					continue // a job may read and write the same file
				}
				if total++; total > limits.deps {
					p.limit(j.Line, "job %q: the workflow has more than %d dependencies, counting those inferred from inputs and outputs", j.ID, limits.deps)
					return inferred
				}
				mark[k] = i + 1
				deps[i] = append(deps[i], k)
				if inferred[i] == nil {
					inferred[i] = make(map[int]string)
				}
				inferred[i][k] = in
			}
		}
		slices.Sort(deps[i])
	}
	return inferred
}

// matchPath reports whether the path name matches pattern part by part
// (see matchName).
func matchPath(pattern, name string) bool {
	sep := string(filepath.Separator)
	if strings.Count(pattern, sep) != strings.Count(name, sep) {
		return false
	}
	for pattern != "" || name != "" {
		pp, prest, _ := strings.Cut(pattern, sep)
		np, nrest, _ := strings.Cut(name, sep)
		if pp != np && !matchName(pp, np) {
			return false
		}
		pattern, name = prest, nrest
	}
	return true
}
