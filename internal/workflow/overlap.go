package workflow

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// This file refuses outputs that could name the same file: two jobs'
// outputs, or an output pattern and a source (an input that no job
// makes). A job's outputs are what it may remove when it fails, and what
// counts as made by it; so no file may belong to two jobs, nor a user's
// file to any.
//
// Two outputs overlap when some path matches both, or when one can match
// a folder that holds what the other can match (a folder output owns
// what is in it). Patterns are compared part by part (see
// [patternsMeet]), so that "out/*.txt" and "out/a-*" overlap and
// "out/a/*" and "out/b/*" do not.

// claim is an output of a job, as overlap compares them.
type claim struct {
	job   int    // index in the jobs being checked
	text  text   // as written, substituted, with its line
	key   string // absolute against the working folder, cleaned (patterns escaped)
	fixed string // key up to its first pattern character: every match begins with it
}

// outputKeys are the output paths of a workflow's jobs, by key (see
// claim): the job of each, and the keys sorted.
type outputKeys struct {
	job    map[string]int
	sorted []string
}

// overlaps reports every pair of jobs whose outputs overlap, and every
// output pattern that matches an input that no job makes unless the job
// that reads it runs after the pattern's (deps, as resolve has them, the
// inferred ones included): the reader then reads what that job makes.
// The output paths are p.made, as infer found them. It stops at a limit
// (p.stop).
func (p *parser) overlaps(jobs []*job, deps [][]int) {
	byPath := p.made.job
	var pats []claim
	for i, j := range jobs {
		for _, t := range j.outputs {
			if IsPattern(t.s) {
				k := p.patternKey(t.s)
				pats = append(pats, claim{job: i, text: t, key: k, fixed: fixedPart(k)})
			}
		}
	}
	sep := string(filepath.Separator)
	// lit returns the claim of the output path k.
	lit := func(k string) claim {
		i := byPath[k]
		for _, t := range jobs[i].outputs {
			if !IsPattern(t.s) && p.pathKey(t.s) == k {
				return claim{job: i, text: t, key: k, fixed: k}
			}
		}
		return claim{job: i, key: k, fixed: k}
	}
	at := func(c claim) string {
		return fmt.Sprintf("outputs %q of job %q (%s:%d)", c.text.s, jobs[c.job].ID, p.file, c.text.line)
	}
	report := func(c, other claim, how string) {
		p.fail(c.text.line, "job %q: outputs %q %s %s: a file may be the output of one job only", jobs[c.job].ID, c.text.s, how, at(other))
	}
	// An output path inside another's folder.
	for _, k := range p.made.sorted {
		for d := filepath.Dir(k); d != sep && d != "."; d = filepath.Dir(d) {
			if i, ok := byPath[d]; ok && i != byPath[k] {
				report(lit(k), lit(d), "lies inside")
				break
			}
		}
	}
	budget := matchBudget
	spend := func(c claim) bool {
		if budget--; budget >= 0 {
			return true
		}
		p.limit(c.text.line, "job %q: outputs %q: the output patterns of this workflow take too long to compare; give them a fixed start, as in \"out/chunk-*\"", jobs[c.job].ID, c.text.s)
		return false
	}
	slices.SortFunc(pats, func(a, b claim) int { return strings.Compare(a.fixed, b.fixed) })
	if len(pats) == 0 {
		p.sources(jobs, deps, nil, byPath, spend)
		return
	}
	for a, c := range pats {
		// Output paths that begin with its fixed part: it may match
		// them, or a folder above them.
		sorted := p.made.sorted
		for _, k := range sorted[sort.SearchStrings(sorted, c.fixed):] {
			if !strings.HasPrefix(k, c.fixed) {
				break
			}
			if !spend(c) {
				return
			}
			if byPath[k] != c.job && patternsMeet(c.key, k) {
				report(c, lit(k), "can match")
				break
			}
		}
		// Output paths that are folders above what it matches.
		for d := filepath.Dir(c.fixed + "x"); d != sep && d != "."; d = filepath.Dir(d) {
			if i, ok := byPath[d]; ok && i != c.job {
				report(c, lit(d), "can match files inside")
				break
			}
		}
		// Patterns whose fixed part begins with its own (the others
		// see it from their side).
		for _, o := range pats[a+1:] {
			if !strings.HasPrefix(o.fixed, c.fixed) {
				break
			}
			if !spend(c) {
				return
			}
			if o.job != c.job && patternsMeet(c.key, o.key) {
				report(o, c, "can match the same files as")
				break
			}
		}
	}
	p.sources(jobs, deps, pats, byPath, spend)
}

// sources finds each job's sources (Job.Sources): its input paths that
// no job makes (none has them as an output path, or has an output
// folder above them, or has an output pattern that matches them and runs
// before the reader). It reports the output patterns that match a
// source: a job's outputs may not include one. A pattern can match a
// path only if the folder its fixed part names is the path's folder or
// one above it: the patterns are found by those folders.
func (p *parser) sources(jobs []*job, deps [][]int, pats []claim, byPath map[string]int, spend func(claim) bool) {
	sep := string(filepath.Separator)
	byDir := make(map[string][]int) // the folder of a pattern's fixed part -> indexes in pats
	for n, c := range pats {
		d := filepath.Dir(c.fixed + "x")
		byDir[d] = append(byDir[d], n)
	}
	reported := make([]bool, len(pats))
	for i, j := range jobs {
	inputs:
		for _, in := range j.Inputs {
			if IsPattern(in) {
				continue
			}
			k := p.pathKey(in)
			for d := k; d != sep && d != "."; d = filepath.Dir(d) {
				if _, made := byPath[d]; made {
					continue inputs
				}
			}
			var clash []int // the patterns that match it
			for d := filepath.Dir(k); ; d = filepath.Dir(d) {
				for _, n := range byDir[d] {
					c := pats[n]
					if !strings.HasPrefix(k, c.fixed) || strings.Count(c.key, sep) > strings.Count(k, sep) {
						continue // a deeper pattern matches what is in a source folder, not its files
					}
					if !spend(c) {
						return
					}
					if !patternsMeet(c.key, k) {
						continue
					}
					if i != c.job && slices.Contains(deps[i], c.job) {
						continue inputs // the reader reads what that job makes
					}
					clash = append(clash, n)
				}
				if d == sep || d == "." {
					break
				}
			}
			j.Sources = append(j.Sources, in)
			for _, n := range clash {
				if reported[n] {
					continue
				}
				reported[n] = true
				c := pats[n]
				what := fmt.Sprintf("input %q of job %q (%s:%d)", in, j.ID, p.file, j.Line)
				hint := fmt.Sprintf("; if %q reads what %q makes, write after: [%q]", j.ID, jobs[c.job].ID, jobs[c.job].ID)
				if i == c.job {
					what, hint = fmt.Sprintf("its own input %q", in), "; name the files it makes instead"
				}
				p.fail(c.text.line, "job %q: outputs %q can match %s, a file that no job makes: a job's outputs may not include a source%s", jobs[c.job].ID, c.text.s, what, hint)
			}
		}
	}
}

// fixedPart returns the start of the pattern key k before its first
// pattern character: what every path it matches begins with.
func fixedPart(k string) string {
	if n := strings.IndexAny(k, `*?[\`); n >= 0 {
		return k[:n]
	}
	return k
}

// patternsMeet reports whether some path matches both a and b (patterns
// or paths, as [Glob] matches them), or matches one of them and lies in
// a folder that the other matches: part by part over the parts both
// have.
func patternsMeet(a, b string) bool {
	sep := string(filepath.Separator)
	pa, pb := strings.Split(a, sep), strings.Split(b, sep)
	for i := range min(len(pa), len(pb)) {
		if !namesMeet(pa[i], pb[i]) {
			return false
		}
	}
	return true
}

// Claims returns the job whose outputs could name the folder dir (absolute,
// or relative to the working folder), a folder above it, or a file in it
// with one of names, and that output; nil when none could. poolrun's own
// files (logs, reports, join files) must not be any job's.
func (w *Workflow) Claims(dir string, names ...string) (*Job, string) {
	if !filepath.IsAbs(dir) && w.Dir != "" {
		dir = filepath.Join(w.Dir, dir)
	}
	dir = filepath.Clean(dir)
	named := make(map[string]bool, len(names))
	for _, n := range names {
		named[n] = true
	}
	sep := string(filepath.Separator)
	depth := strings.Count(dir, sep)
	if dir == sep {
		depth = 0
	}
	for _, j := range w.Jobs {
		for _, o := range j.Outputs {
			if !IsPattern(o) {
				k := o
				if !filepath.IsAbs(o) && w.Dir != "" {
					k = filepath.Join(w.Dir, o)
				}
				k = filepath.Clean(k)
				if k == dir || strings.HasPrefix(dir, k+sep) || filepath.Dir(k) == dir && named[filepath.Base(k)] {
					return j, o
				}
				continue
			}
			k := o
			if !filepath.IsAbs(o) && w.Dir != "" {
				k = EscapePattern(w.Dir) + sep + o
			}
			k = filepath.Clean(k)
			switch parts := strings.Count(k, sep); {
			case parts <= depth:
				if patternsMeet(k, dir) { // dir, or a folder above it
					return j, o
				}
			case parts == depth+1 && patternsMeet(k, dir):
				last := k[strings.LastIndex(k, sep)+1:]
				for _, n := range names {
					if matchName(last, n) {
						return j, o
					}
				}
			}
		}
	}
	return nil, ""
}

// namesMeet reports whether some file name matches both a and b, patterns
// of one part of a path as [path/filepath.Match] takes them, under the
// shell's rule for a leading dot (see matchName). A malformed pattern
// meets nothing.
func namesMeet(a, b string) bool {
	ta, oka := tokens(a)
	tb, okb := tokens(b)
	if !oka || !okb {
		return false
	}
	// A name that begins with a dot matches only a pattern that begins
	// with one: either both begin with one, or the name does not.
	if dotA, dotB := leadingDot(ta), leadingDot(tb); dotA != dotB {
		return false
	}
	seen := make(map[[2]int]bool)
	var meet func(i, j int) bool
	meet = func(i, j int) bool {
		if i == len(ta) && j == len(tb) {
			return true
		}
		if seen[[2]int{i, j}] {
			return false
		}
		seen[[2]int{i, j}] = true
		switch {
		case i < len(ta) && ta[i].star:
			// The star matches nothing more, or one more character of b's.
			return meet(i+1, j) || j < len(tb) && meet(i, j+1)
		case j < len(tb) && tb[j].star:
			return meet(i, j+1) || i < len(ta) && meet(i+1, j)
		case i < len(ta) && j < len(tb):
			return ta[i].meets(tb[j]) && meet(i+1, j+1)
		}
		return false
	}
	return meet(0, 0)
}

// token is one element of a name pattern: a star, or one character out of
// a set (a literal, ?, or a class).
type token struct {
	star   bool
	any    bool      // ?
	ranges [][2]rune // the characters matched, lo to hi; a literal is one
	negate bool
}

// has reports whether t, a one-character token, matches c.
func (t token) has(c rune) bool {
	if c == filepath.Separator {
		return false
	}
	if t.any {
		return true
	}
	in := false
	for _, r := range t.ranges {
		if r[0] <= c && c <= r[1] {
			in = true
			break
		}
	}
	return in != t.negate
}

// meets reports whether some character matches both t and u: the sets are
// unions of ranges, so if they share one they share one of the ends of a
// range, or a character next to one.
func (t token) meets(u token) bool {
	try := []rune{'a', 'Z', '0', '_', 0x10FFFF}
	for _, x := range [][][2]rune{t.ranges, u.ranges} {
		for _, r := range x {
			try = append(try, r[0], r[1], r[0]-1, r[1]+1)
		}
	}
	for _, c := range try {
		if c >= 0 && t.has(c) && u.has(c) {
			return true
		}
	}
	return false
}

// leadingDot reports whether every name the tokens match begins with a
// dot (its first token is a literal dot).
func leadingDot(ts []token) bool {
	return len(ts) > 0 && !ts[0].star && !ts[0].any && !ts[0].negate &&
		len(ts[0].ranges) == 1 && ts[0].ranges[0] == [2]rune{'.', '.'}
}

// tokens splits a name pattern into its tokens; false if it is malformed.
func tokens(p string) ([]token, bool) {
	var ts []token
	rs := []rune(p)
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; c {
		case '*':
			if len(ts) == 0 || !ts[len(ts)-1].star {
				ts = append(ts, token{star: true})
			}
		case '?':
			ts = append(ts, token{any: true})
		case '\\':
			if i++; i == len(rs) {
				return nil, false
			}
			ts = append(ts, token{ranges: [][2]rune{{rs[i], rs[i]}}})
		case '[':
			t := token{}
			i++
			if i < len(rs) && rs[i] == '^' {
				t.negate = true
				i++
			}
			for first := true; ; first = false {
				if i >= len(rs) {
					return nil, false
				}
				if rs[i] == ']' && !first {
					break
				}
				lo, ok := classChar(rs, &i)
				if !ok {
					return nil, false
				}
				hi := lo
				if i < len(rs) && rs[i] == '-' {
					i++
					if hi, ok = classChar(rs, &i); !ok {
						return nil, false
					}
				}
				t.ranges = append(t.ranges, [2]rune{lo, hi})
			}
			ts = append(ts, t)
		default:
			ts = append(ts, token{ranges: [][2]rune{{c, c}}})
		}
	}
	return ts, true
}

// classChar reads one character of a class at rs[*i], escaped or not: an
// unescaped '-' or ']' there is a malformed class.
func classChar(rs []rune, i *int) (rune, bool) {
	escaped := *i < len(rs) && rs[*i] == '\\'
	if escaped {
		*i++
	}
	if *i >= len(rs) || !escaped && (rs[*i] == '-' || rs[*i] == ']') {
		return 0, false
	}
	c := rs[*i]
	*i++
	return c, true
}
