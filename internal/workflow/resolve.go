package workflow

import (
	"container/heap"
	"fmt"
	"path"
	"slices"
	"strings"
)

// This file checks needs, resolves after, refuses cycles and orders jobs.

// resolve checks the needs of jobs against items, resolves their after
// lists and returns the jobs in dependency order. It reports every
// mistake; the jobs it returns are of use only if there is none.
func (p *parser) resolve(jobs []*job, items []*Item) []*Job {
	itemSet := make(map[string]*Item, len(items))
	for _, it := range items {
		itemSet[it.Name] = it
	}
	for _, j := range jobs {
		var seen map[string]bool // only for long lists
		if len(j.needs) > 8 {
			seen = make(map[string]bool, len(j.needs))
		}
		for _, t := range j.needs {
			it := itemSet[t.s]
			if it == nil {
				// An item with a mistake of its own was reported.
				if !p.named[t.s] && !p.itemsLost {
					p.fail(t.line, "job %q: needs %q: no such item", j.ID, t.s)
				}
				continue
			}
			if it.Worker != "" && it.Worker != j.Worker {
				p.fail(t.line, "job %q: needs %q: the item is held by worker program %q (line %d), and only that program's jobs (worker: %s) can need it", j.ID, t.s, it.Worker, it.Line, it.Worker)
				continue
			}
			if seen[t.s] || seen == nil && slices.Contains(j.Needs, t.s) {
				continue
			}
			if seen != nil {
				seen[t.s] = true
			}
			j.Needs = append(j.Needs, t.s)
		}
	}

	deps := p.dependencies(jobs)
	if p.stop {
		return nil
	}
	inferred := p.infer(jobs, deps)
	if p.stop {
		return nil
	}
	if p.overlaps(jobs, deps); p.stop {
		return nil
	}
	for i, j := range jobs {
		for _, d := range deps[i] {
			j.After = append(j.After, jobs[d].ID)
		}
		if len(inferred) > 0 && inferred[i] != nil {
			j.Inferred = make(map[string]string, len(inferred[i]))
			for d, in := range inferred[i] {
				j.Inferred[jobs[d].ID] = in
			}
		}
	}
	order := p.order(jobs, deps, inferred)
	if order == nil {
		return nil
	}
	out := make([]*Job, len(order))
	for i, k := range order {
		out[i] = jobs[k].Job
	}
	return out
}

// IsPattern reports whether s (an after entry, an input or an output) is
// a pattern rather than a name or a path. Job ids contain none of these
// characters.
func IsPattern(s string) bool {
	return strings.ContainsAny(s, `*?[\`)
}

// dependencies resolves the after entries of jobs into indexes of jobs:
// deps[i] lists, in increasing order and without duplicates, the jobs that
// jobs[i] runs after. An entry with a mistake is reported and left out;
// it stops at a limit (p.stop).
func (p *parser) dependencies(jobs []*job) [][]int {
	index := make(map[string]int, len(jobs))
	for i, j := range jobs {
		index[j.ID] = i
	}
	var m *matcher // made on the first pattern

	deps := make([][]int, len(jobs))
	mark := make([]int, len(jobs)) // mark[k] == i+1: k is already in deps[i]
	total := 0
	for i, j := range jobs {
		add := func(k int, t text) bool {
			if mark[k] == i+1 {
				return true
			}
			if total++; total > limits.deps {
				p.limit(t.line, "job %q: the workflow has more than %d dependencies", j.ID, limits.deps)
				return false
			}
			mark[k] = i + 1
			deps[i] = append(deps[i], k)
			return true
		}
		var done map[string]bool // patterns already resolved for j
		for _, t := range j.after {
			if !IsPattern(t.s) {
				k, ok := index[t.s]
				switch {
				case !ok && !p.lost: // else it may be a job that could not be read
					p.fail(t.line, "job %q: after %q: no such job", j.ID, t.s)
				case ok && !add(k, t):
					return deps
				}
				continue
			}
			if done[t.s] {
				continue
			}
			if done == nil {
				done = make(map[string]bool)
			}
			done[t.s] = true
			if _, err := path.Match(t.s, ""); err != nil {
				p.fail(t.line, "job %q: after %q: bad pattern", j.ID, t.s)
				continue
			}
			if m == nil {
				ids := make([]string, len(jobs))
				for k, j := range jobs {
					ids[k] = j.ID
				}
				m = newMatcher(ids)
			}
			matched, ok := m.match(t.s)
			if !ok {
				p.limit(t.line, "job %q: after %q: the patterns of this workflow take too long to match; give them a fixed start or end, as in \"chunk-*\"", j.ID, t.s)
				return deps
			}
			found := false
			for _, k := range matched {
				if k == i {
					continue // a pattern never names the job that holds it
				}
				found = true
				if !add(k, t) {
					return deps
				}
			}
			if !found && !p.lost {
				p.fail(t.line, "job %q: after %q matches no job", j.ID, t.s)
			}
		}
		slices.Sort(deps[i])
	}
	return deps
}

// order returns the job indexes in file order, except that a job is moved
// down below every job it runs after; among the jobs whose dependencies are
// all placed, the first in the file comes next. It reports a cycle, and
// returns nil then.
func (p *parser) order(jobs []*job, deps [][]int, inferred []map[int]string) []int {
	waiting := make([]int, len(jobs)) // dependencies not yet placed
	dependents := make([][]int, len(jobs))
	ready := &intHeap{}
	for i, d := range deps {
		waiting[i] = len(d)
		for _, k := range d {
			dependents[k] = append(dependents[k], i)
		}
		if len(d) == 0 {
			*ready = append(*ready, i) // increasing: already a heap
		}
	}
	order := make([]int, 0, len(jobs))
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		order = append(order, i)
		for _, k := range dependents[i] {
			if waiting[k]--; waiting[k] == 0 {
				heap.Push(ready, k)
			}
		}
	}
	if len(order) < len(jobs) {
		p.cycle(jobs, deps, inferred, waiting)
		return nil
	}
	return order
}

// cycle reports a dependency cycle among the jobs that order could not
// place (waiting[i] > 0). Every such job runs after another such job, so
// walking from one must come back to a job already seen. The cycle is
// written from its first job in the file, at that job's line, and names
// the lines of the others and the inputs that make inferred edges.
func (p *parser) cycle(jobs []*job, deps [][]int, inferred []map[int]string, waiting []int) {
	start := slices.IndexFunc(waiting, func(w int) bool { return w > 0 })
	seen := make(map[int]int) // job -> position in path
	var walk []int
	for i := start; ; {
		if n, ok := seen[i]; ok {
			walk = walk[n:]
			break
		}
		seen[i] = len(walk)
		walk = append(walk, i)
		next := slices.IndexFunc(deps[i], func(k int) bool { return waiting[k] > 0 })
		i = deps[i][next]
	}
	first := slices.Index(walk, slices.Min(walk))
	ids := make([]string, 0, len(walk)+1)
	var notes []string
	j := jobs[walk[first]]
	for n := range len(walk) + 1 {
		k := walk[(first+n)%len(walk)]
		if n == len(walk) {
			ids = append(ids, jobs[k].ID)
			break
		}
		if n > 0 && jobs[k].Line != j.Line {
			ids = append(ids, fmt.Sprintf("%s (%s:%d)", jobs[k].ID, p.file, jobs[k].Line))
		} else {
			ids = append(ids, jobs[k].ID)
		}
		next := walk[(first+n+1)%len(walk)]
		if len(inferred) == 0 || len(notes) >= 10 {
			continue
		}
		if in, ok := inferred[k][next]; ok {
			notes = append(notes, fmt.Sprintf("%s reads %s, an output of %s", jobs[k].ID, in, jobs[next].ID))
		}
	}
	msg := "dependency cycle: " + strings.Join(ids, " -> ")
	if len(notes) > 0 {
		msg += "; " + strings.Join(notes, "; ")
	}
	p.fail(j.Line, "%s", msg)
}

// intHeap is a min-heap of ints for container/heap.
type intHeap []int

func (h intHeap) Len() int           { return len(h) }
func (h intHeap) Less(a, b int) bool { return h[a] < h[b] }
func (h intHeap) Swap(a, b int)      { h[a], h[b] = h[b], h[a] }
func (h *intHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *intHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
