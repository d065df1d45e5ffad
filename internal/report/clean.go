package report

import (
	"strings"
	"unicode/utf8"
)

// The page is well-formed XML as well as HTML (a test parses it whole),
// and XML cannot hold every character a report may: html/template
// escapes the markup, and clean replaces, before, what XML cannot hold.

// clean is s with every character XML 1.0 cannot hold (control
// characters other than tab and newline, invalid UTF-8, U+FFFE and
// U+FFFF) replaced by U+FFFD.
func clean(s string) string {
	if strings.IndexFunc(s, notXML) < 0 {
		return s
	}
	// Invalid UTF-8 comes to the mapping as utf8.RuneError, which it keeps.
	return strings.Map(func(r rune) rune {
		if notXML(r) {
			return utf8.RuneError
		}
		return r
	}, s)
}

// notXML reports whether r is a character that XML 1.0 cannot hold, or
// utf8.RuneError (which is also what invalid UTF-8 decodes as).
func notXML(r rune) bool {
	return r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == utf8.RuneError || r == 0xFFFE || r == 0xFFFF
}

// cleanPool is a copy of r whose texts are clean. The result is marshalled
// to JSON, which escapes what XML cannot hold.
func cleanPool(r *Pool) *Pool {
	c := *r
	c.Command = clean(r.Command)
	c.Options.Evict = clean(r.Options.Evict)
	c.Workers = make([]Worker, len(r.Workers))
	for i, w := range r.Workers {
		w.Host = clean(w.Host)
		items := make([]*Item, len(w.Items))
		for k, it := range w.Items {
			ci := *it
			ci.Name, ci.EvictedBy = clean(it.Name), clean(it.EvictedBy)
			items[k] = &ci
		}
		if w.Items != nil {
			w.Items = items
		}
		c.Workers[i] = w
	}
	c.Jobs = make([]*Job, len(r.Jobs))
	for i, j := range r.Jobs {
		cj := *j
		cj.Func, cj.Status, cj.Error, cj.JobID, cj.Signal = clean(j.Func), clean(j.Status), clean(j.Error), clean(j.JobID), clean(j.Signal)
		if j.Labels != nil {
			cj.Labels = make(map[string]string, len(j.Labels))
			for k, v := range j.Labels {
				cj.Labels[clean(k)] = clean(v)
			}
		}
		cj.Attempts = make([]Attempt, len(j.Attempts))
		for k, a := range j.Attempts {
			a.Status, a.Error, a.Signal, a.StderrTail = clean(a.Status), clean(a.Error), clean(a.Signal), clean(a.StderrTail)
			cj.Attempts[k] = a
		}
		if j.Attempts == nil {
			cj.Attempts = nil
		}
		c.Jobs[i] = &cj
	}
	return &c
}

// cleanBench is a copy of b whose texts are clean.
func cleanBench(b *Bench) *Bench {
	c := *b
	c.Config, c.Checksum = clean(b.Config), clean(b.Checksum)
	c.Results = make([]*BenchSet, len(b.Results))
	for i, set := range b.Results {
		cs := *set
		cs.Modes = make([]*BenchMode, len(set.Modes))
		for k, mf := range set.Modes {
			cm := *mf
			cm.Mode, cm.Options.Evict = clean(mf.Mode), clean(mf.Options.Evict)
			cm.Runs = make([]BenchRun, len(mf.Runs))
			for n, r := range mf.Runs {
				r.Checksum = clean(r.Checksum)
				cm.Runs[n] = r
			}
			cs.Modes[k] = &cm
		}
		c.Results[i] = &cs
	}
	return &c
}
