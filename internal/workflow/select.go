package workflow

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// This file selects the jobs that targets need, as make runs a target and
// what it depends on.

// Select returns the workflow that runs only targets and the jobs they
// need: a copy of w with the jobs whose ids match one of targets (ids or
// patterns, as after takes them: see [Workflow.Match]), or, for a target
// that matches no id, the jobs that make it, a file or a glob of files
// (see [Workflow.Makers]), and every job they run after, directly or not (After, which holds the dependencies
// inferred from inputs and outputs too), in the order of w.Jobs, and only
// the items those jobs need. The jobs are w's own, not copies.
//
// Every target must be a valid pattern and match some job or name some
// job's file: otherwise Select returns an error, matching
// [ErrUnknownTarget], that names each such target and the ids and the
// outputs closest to it. With no targets it returns w.
func (w *Workflow) Select(targets []string) (*Workflow, error) {
	if len(targets) == 0 {
		return w, nil
	}
	byID := make(map[string]*Job, len(w.Jobs))
	for _, j := range w.Jobs {
		byID[j.ID] = j
	}
	chosen := make(map[string]bool)
	var stack []*Job
	var bad []string
	for _, t := range targets {
		jobs, err := w.Match(t)
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("%v %q: not a valid pattern", ErrUnknownTarget, t))
			continue
		case len(jobs) == 0:
			jobs = w.Makers(t)
		}
		if len(jobs) == 0 {
			msg := fmt.Sprintf("%v %q: no job of %s", ErrUnknownTarget, t, w.File)
			if IsPattern(t) {
				msg += " matches it, nor makes a file it matches"
			} else {
				msg += " has this id, nor makes this file"
			}
			if near := w.closest(t, 3); len(near) > 0 {
				msg += "; closest: " + strings.Join(near, ", ")
			}
			if near := w.closestOutputs(t, 3); len(near) > 0 {
				msg += "; closest outputs: " + strings.Join(near, ", ")
			}
			bad = append(bad, msg)
			continue
		}
		for _, j := range jobs {
			if !chosen[j.ID] {
				chosen[j.ID] = true
				stack = append(stack, j)
			}
		}
	}
	if len(bad) > 0 {
		return nil, &targetError{strings.Join(bad, "\n")}
	}
	for len(stack) > 0 {
		j := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, a := range j.After {
			if d := byID[a]; d != nil && !chosen[a] {
				chosen[a] = true
				stack = append(stack, d)
			}
		}
	}
	sel := *w
	sel.Jobs = make([]*Job, 0, len(chosen))
	needed := make(map[string]bool)
	for _, j := range w.Jobs {
		if chosen[j.ID] {
			sel.Jobs = append(sel.Jobs, j)
			for _, n := range j.Needs {
				needed[n] = true
			}
		}
	}
	sel.Items = nil
	for _, it := range w.Items {
		if needed[it.Name] {
			sel.Items = append(sel.Items, it)
		}
	}
	return &sel, nil
}

// Makers returns the jobs of w, in the order of w.Jobs, whose outputs
// make the file target names: target is a path or a glob of paths (as
// inputs take them: see [Glob]), relative to the working folder (w.Dir)
// or absolute, and an output makes it when some path is both the
// output (or a file in it, for a folder output) and target (or a file
// in it, for a folder target): one of its plain outputs, a file that an
// output pattern matches, or a file in a folder target. A target that
// is not a valid pattern makes nothing.
func (w *Workflow) Makers(target string) []*Job {
	if _, err := filepath.Match(target, ""); err != nil {
		return nil
	}
	t := absPattern(w.Dir, target)
	var jobs []*Job
	for _, j := range w.Jobs {
		for _, o := range j.Outputs {
			if patternsMeet(absPattern(w.Dir, o), t) {
				jobs = append(jobs, j)
				break
			}
		}
	}
	return jobs
}

// closestOutputs returns up to n outputs of w's jobs, as written, nearest
// to target as closest finds ids.
func (w *Workflow) closestOutputs(target string, n int) []string {
	var outs []string
	seen := map[string]bool{}
	for _, j := range w.Jobs {
		for _, o := range j.Outputs {
			if !seen[o] {
				seen[o] = true
				outs = append(outs, o)
			}
		}
	}
	return nearest(target, outs, n)
}

// closest returns up to n ids of w nearest to target in edit distance,
// nearest first (ties in the order of w.Jobs), leaving out those too far
// to be a slip of the keyboard: more edits than a third of the longer
// string, and at least two.
func (w *Workflow) closest(target string, n int) []string {
	ids := make([]string, len(w.Jobs))
	for i, j := range w.Jobs {
		ids[i] = j.ID
	}
	return nearest(target, ids, n)
}

// nearest returns up to n of names nearest to target in edit distance,
// as closest says.
func nearest(target string, names []string, n int) []string {
	type near struct {
		name string
		dist int
	}
	var found []near
	for _, name := range names {
		limit := max(2, max(len(target), len(name))/3)
		if d := editDistance(target, name, limit); d <= limit {
			found = append(found, near{name, d})
		}
	}
	slices.SortStableFunc(found, func(a, b near) int { return a.dist - b.dist })
	var out []string
	for _, f := range found[:min(n, len(found))] {
		out = append(out, f.name)
	}
	return out
}

// editDistance returns the Levenshtein distance between a and b (in
// bytes: ids are ASCII), or limit+1 when it is more than limit.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for k := range prev {
		prev[k] = k
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		best := cur[0]
		for k := 1; k <= len(b); k++ {
			cost := 1
			if a[i-1] == b[k-1] {
				cost = 0
			}
			cur[k] = min(prev[k]+1, cur[k-1]+1, prev[k-1]+cost)
			best = min(best, cur[k])
		}
		if best > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// targetError is the error of Select: one line per unknown target.
type targetError struct{ msg string }

func (e *targetError) Error() string { return e.msg }

func (e *targetError) Unwrap() error { return ErrUnknownTarget }
