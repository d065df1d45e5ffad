package workflow

import (
	"fmt"
	"slices"
	"strings"
)

// This file selects the jobs that targets need, as make runs a target and
// what it depends on.

// Select returns the workflow that runs only targets and the jobs they
// need: a copy of w with the jobs whose ids match one of targets (ids or
// patterns, as after takes them: see [Workflow.Match]) and every job they
// run after, directly or not (After, which holds the dependencies
// inferred from inputs and outputs too), in the order of w.Jobs, and only
// the items those jobs need. The jobs are w's own, not copies.
//
// Every target must be a valid pattern and match some job: otherwise
// Select returns an error, matching [ErrUnknownTarget], that names each
// such target and the ids closest to it. With no targets it returns w.
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
			msg := fmt.Sprintf("%v %q: no job of %s", ErrUnknownTarget, t, w.File)
			if isPattern(t) {
				msg += " matches it"
			} else {
				msg += " has this id"
			}
			if near := w.closest(t, 3); len(near) > 0 {
				msg += "; closest: " + strings.Join(near, ", ")
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

// closest returns up to n ids of w nearest to target in edit distance,
// nearest first (ties in the order of w.Jobs), leaving out those too far
// to be a slip of the keyboard: more edits than a third of the longer
// string, and at least two.
func (w *Workflow) closest(target string, n int) []string {
	type near struct {
		id   string
		dist int
	}
	var found []near
	for _, j := range w.Jobs {
		limit := max(2, max(len(target), len(j.ID))/3)
		if d := editDistance(target, j.ID, limit); d <= limit {
			found = append(found, near{j.ID, d})
		}
	}
	slices.SortStableFunc(found, func(a, b near) int { return a.dist - b.dist })
	var ids []string
	for _, f := range found[:min(n, len(found))] {
		ids = append(ids, f.id)
	}
	return ids
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
