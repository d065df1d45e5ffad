package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/poolrun/poolrun/cachepool"
)

// Items learned from use: a job that gets an item it did not declare
// (neither its function's Uses nor its own Needs) gets no help from the
// window, which lists only declared items, so its worker evicts the item
// before its next job and builds it again. The worker watches each job's
// Gets (cachepool.Watch) and names the undeclared items in the job's
// reply; the pool then counts each as needed by every unfinished job of
// the function, and by those queued later, as if the function had
// declared it.

// itemsMode is what a pool's workers do of a job's undeclared items.
type itemsMode uint8

const (
	itemsLearn   itemsMode = iota // noted in the reply, and learned (the default)
	itemsIgnored                  // not looked at (LearnItems(false))
	itemsStrict                   // fail the job (StrictItems)
)

// LearnItems turns the learning of undeclared items on (the default) or
// off. Off, workers do not watch what a job gets: an undeclared item is
// built anew for every job that gets it, and nothing is said.
func LearnItems(on bool) Option {
	return func(c *config) {
		if on {
			c.items = itemsLearn
		} else {
			c.items = itemsIgnored
		}
	}
}

// StrictItems makes a job that gets an item it did not declare fail, with
// an error that names the item and the job's function; the item is not
// built (its Get returns an error wrapping cachepool.ErrUndeclared). For
// the tests and CI of a program that embeds the pool: what LearnItems
// would learn becomes a mistake to fix.
func StrictItems() Option {
	return func(c *config) { c.items = itemsStrict }
}

// watchJob starts watching the Gets of the job about to run, whose
// declared keys are keys (sorted); unwatch stops and returns what the job
// got undeclared.
func (r *runner) watchJob(keys []uint64) {
	if r.watch != nil {
		r.watch.Reset(keys)
		r.cache.SetWatch(r.watch)
	}
}

func (r *runner) unwatch() []cachepool.Undeclared {
	if r.watch == nil {
		return nil
	}
	r.cache.SetWatch(nil)
	u := r.watch.Found()
	r.watch.Reset(nil)
	if len(u) == 0 {
		return nil
	}
	return u
}

// undeclaredError is the message of a job of fn failed by StrictItems.
func undeclaredError(fn string, items []cachepool.Undeclared) string {
	names := make([]string, len(items))
	for i, u := range items {
		names[i] = fmt.Sprintf("%q", u.Name)
	}
	return fmt.Sprintf("engine: a job of %q got item %s without declaring it (StrictItems): declare it with engine.Uses when registering %q, or engine.Needs on the job",
		fn, strings.Join(names, ", "), fn)
}

// learnedPair is a function and an item family, said once.
type learnedPair struct {
	fn     *funcEntry
	family string
}

// learn takes the items that job j got without declaring them on the
// worker of pl. p.mu is held.
func (s *scheduler) learn(pl *place, j *job, items []cachepool.Undeclared) {
	p := s.p
	if p.cfg.items != itemsLearn {
		return // strict: the job failed, naming them
	}
	w := p.cfg.output.err()
	for _, u := range items {
		if u.Family != "" {
			pair := learnedPair{j.fn, u.Family}
			if p.said[pair] {
				continue
			}
			if p.said == nil {
				p.said = map[learnedPair]bool{}
			}
			p.said[pair] = true
			p.emit(Event{Kind: ItemLearned, JobID: j.id, Func: j.fn.name, Labels: j.labels, Worker: pl.index, item: &itemNote{key: u.Key, name: u.Name}})
			fmt.Fprintf(w, "engine: jobs of %q get items of family %q (%q) without declaring them; the pool cannot learn a family's members, whose names vary: declare each with engine.Needs on its job\n",
				j.fn.name, u.Family, u.Name)
			continue
		}
		if slices.Contains(p.learned[j.fn], u.Key) || slices.Contains(j.fn.keys, u.Key) {
			continue
		}
		if p.learned == nil {
			p.learned = map[*funcEntry][]uint64{}
		}
		p.learned[j.fn] = append(p.learned[j.fn], u.Key)
		s.needKey(j.fn, u.Key)
		p.emit(Event{Kind: ItemLearned, JobID: j.id, Func: j.fn.name, Labels: j.labels, Worker: pl.index, item: &itemNote{key: u.Key, name: u.Name}})
		fmt.Fprintf(w, "engine: jobs of %q get item %q without declaring it; the pool keeps it for them from now on: declare it with engine.Uses when registering %q (or engine.Needs on the job)\n",
			j.fn.name, u.Name, j.fn.name)
	}
}

// needKey adds key to the items of every unfinished job of fn, counted as
// the job's own would be: needed, and not sent yet or held by the worker
// it was sent to. A Queued job stays in its ready group (affinity sees its
// declared items until it goes). p.mu is held.
func (s *scheduler) needKey(fn *funcEntry, key uint64) {
	p := s.p
	at := map[*job]*place{}
	for _, pl := range s.places {
		for _, o := range pl.inflight {
			if o.fn == fn {
				at[o] = pl
			}
		}
	}
	one := []uint64{key}
	for _, o := range p.jobs {
		if o.fn != fn || o.Status().Done() {
			continue
		}
		if _, ok := slices.BinarySearch(o.keys, key); ok {
			continue
		}
		o.keys = withKeys(o.keys, key)
		o.sig = sigOf(o.keys)
		p.need(one)
		if unsentStatus(o.Status()) {
			p.unsent.add(one)
		} else if pl := at[o]; pl != nil {
			s.addHeld(pl, one)
		}
	}
}

// withKeys returns the sorted set keys with more added, in a new slice
// (a job's keys may be its function's).
func withKeys(keys []uint64, more ...uint64) []uint64 {
	out := slices.Concat(keys, more)
	slices.Sort(out)
	return slices.Compact(out)
}
