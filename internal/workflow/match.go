package workflow

import (
	"path"
	"slices"
	"sort"
	"strings"
)

// matchBudget bounds the ids tried against patterns in one workflow: a
// second or so of work. Patterns with a fixed start or end, the usual kind,
// try only the ids that start or end that way and rarely come near it.
const matchBudget = 5_000_000

// A matcher finds the ids that after patterns match. Ids contain no
// pattern characters and are ASCII.
type matcher struct {
	ids    []string
	rev    []string // rev[k] is ids[k] backwards
	byID   []int    // indexes of ids, sorted by id
	byRev  []int    // indexes of ids, sorted by rev
	cache  map[string][]int
	budget int
}

func newMatcher(ids []string) *matcher {
	m := &matcher{
		ids:    ids,
		rev:    make([]string, len(ids)),
		byID:   make([]int, len(ids)),
		byRev:  make([]int, len(ids)),
		cache:  make(map[string][]int),
		budget: matchBudget,
	}
	for k, id := range ids {
		m.rev[k] = reverse(id)
		m.byID[k], m.byRev[k] = k, k
	}
	sort.Slice(m.byID, func(a, b int) bool { return ids[m.byID[a]] < ids[m.byID[b]] })
	sort.Slice(m.byRev, func(a, b int) bool { return m.rev[m.byRev[a]] < m.rev[m.byRev[b]] })
	return m
}

// match returns, in increasing order, the indexes of the ids that the
// valid pattern matches. It returns false if the workflow's patterns have
// used up the budget.
func (m *matcher) match(pattern string) ([]int, bool) {
	if got, ok := m.cache[pattern]; ok {
		return got, true
	}
	prefix, suffix := literals(pattern)
	// The candidates: the ids with the prefix or those with the suffix,
	// whichever are fewer.
	cands := span(m.byID, m.ids, prefix)
	if bySuffix := span(m.byRev, m.rev, reverse(suffix)); len(bySuffix) < len(cands) {
		cands = bySuffix
	}
	if m.budget -= len(cands); m.budget < 0 {
		return nil, false
	}
	var got []int
	for _, k := range cands {
		id := m.ids[k]
		if !strings.HasPrefix(id, prefix) || !strings.HasSuffix(id, suffix) {
			continue
		}
		if ok, _ := path.Match(pattern, id); ok {
			got = append(got, k)
		}
	}
	slices.Sort(got)
	m.cache[pattern] = got
	return got, true
}

// literals returns the fixed text that every id matched by pattern starts
// and ends with. The suffix is only worked out for patterns without
// classes and escapes, where it is what follows the last * or ?.
func literals(pattern string) (prefix, suffix string) {
	prefix = pattern
	if n := strings.IndexAny(pattern, `*?[\`); n >= 0 {
		prefix = pattern[:n]
	}
	if !strings.ContainsAny(pattern, `[\`) {
		suffix = pattern[strings.LastIndexAny(pattern, "*?")+1:]
	}
	return prefix, suffix
}

// span returns the part of order (indexes of keys, sorted by key) whose
// keys start with prefix.
func span(order []int, keys []string, prefix string) []int {
	start := sort.Search(len(order), func(n int) bool { return keys[order[n]] >= prefix })
	end := start + sort.Search(len(order)-start, func(n int) bool {
		return !strings.HasPrefix(keys[order[start+n]], prefix)
	})
	return order[start:end]
}

// reverse returns the ASCII string s backwards.
func reverse(s string) string {
	b := []byte(s)
	slices.Reverse(b)
	return string(b)
}
