package engine

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/poolrun/poolrun/cachepool"
)

// The history of the items on each worker: a worker's cache keeps a
// journal (cachepool.Cache.SetJournal) of its builds and evictions, which
// the worker sends with its replies, states and goodbye; the scheduler
// turns each record into an ItemBuilt or ItemEvicted event.

// EvictReason says why a worker evicted an item (see [ItemEvicted]).
type EvictReason uint8

const (
	// EvictedByPolicy: the pool's eviction policy freed it (see
	// [EvictPolicy]): no unfinished job needed it any more, or, under
	// [EvictEachJob], the job that needed it ended.
	EvictedByPolicy EvictReason = 1 + iota
	// EvictedForBudget: it made room for another item within the worker's
	// cache budget (see [CacheBudget]).
	EvictedForBudget
	// EvictedAtEnd: the worker cleared its cache when it stopped at the
	// end of the pool.
	EvictedAtEnd
)

var reasonNames = [...]string{EvictedByPolicy: "policy", EvictedForBudget: "budget", EvictedAtEnd: "end"}

// String returns "policy", "budget" or "end".
func (r EvictReason) String() string {
	if r >= EvictedByPolicy && int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", int(r))
}

// itemNote is one build (reason 0) or eviction of an item on a worker, as
// it travels to the parent: for a build, start and end are when the build
// began and ended; for an eviction, both are when it was decided.
type itemNote struct {
	key        uint64
	name       string
	bytes      int64
	start, end time.Time
	reason     EvictReason // 0 for a build
}

// takeItems moves the records of the cache's journal into r.notes, its
// evictions marked with why. r.mu is held, or the job that the serve loop
// runs under it calls (a build's budget eviction).
func (r *runner) takeItems(why EvictReason) {
	// Builds and evictions move the cache's version as they are recorded
	// (under the cache's lock): with the version where it was before the
	// last take, there is nothing to take.
	v := r.cache.Version()
	if r.taken && v == r.takenVersion {
		return
	}
	r.taken, r.takenVersion = true, v
	r.journal, _ = r.cache.TakeJournal(r.journal[:0])
	for _, rec := range r.journal {
		r.notes = append(r.notes, noteOf(rec, why))
	}
	clear(r.journal)
}

// itemNotes hands over the notes taken since the last call. r.mu is held.
func (r *runner) itemNotes() []itemNote {
	n := r.notes
	r.notes = nil
	return n
}

// items reports the builds and evictions of the worker of pl to the
// listener. p.mu is held.
func (s *scheduler) items(pl *place, notes []itemNote) {
	if s.p.cfg.listener == nil {
		return
	}
	for i := range notes {
		n := &notes[i]
		kind := ItemBuilt
		if n.reason != 0 {
			kind = ItemEvicted
		}
		s.p.emit(Event{Kind: kind, Worker: pl.index, item: n})
	}
}

// fill sets the item fields of e from n.
func (n *itemNote) fill(e *Event) {
	e.Item, e.ItemBytes, e.ItemStart, e.ItemEnd, e.Reason = n.name, n.bytes, n.start, n.end, n.reason
}

// minItemNote is the fewest bytes an item note takes on the wire: a
// reason, a key, a name's length, a size and two times.
const minItemNote = 1 + 8 + 1 + 1 + 1 + 1

// items encodes item notes; their times travel as how long before now
// they were, so that a worker's clock need not agree with its parent's.
func (e *enc) items(ns []itemNote) {
	e.uint(uint64(len(ns)))
	if len(ns) == 0 {
		return // no clock to read
	}
	now := time.Now()
	for _, n := range ns {
		e.b = append(e.b, byte(n.reason))
		e.b = binary.LittleEndian.AppendUint64(e.b, n.key)
		e.string(n.name)
		e.int(n.bytes)
		e.int(int64(now.Sub(n.start)))
		e.int(int64(now.Sub(n.end)))
	}
}

// items decodes item notes, their times by this process's clock.
func (d *dec) items() []itemNote {
	n := d.uint()
	if n > uint64(len(d.b)/minItemNote) {
		d.fail()
		return nil
	}
	if n == 0 {
		return nil
	}
	now := time.Now()
	ns := make([]itemNote, 0, n)
	for range n {
		r := EvictReason(d.byte())
		k := d.raw(8)
		if d.err != nil || int(r) >= len(reasonNames) {
			d.fail()
			return nil
		}
		in := itemNote{reason: r, key: binary.LittleEndian.Uint64(k), name: d.string(), bytes: d.int()}
		in.start = now.Add(-time.Duration(d.int()))
		in.end = now.Add(-time.Duration(d.int()))
		ns = append(ns, in)
	}
	if d.err != nil {
		return nil
	}
	return ns
}

// noteOf is the item note of a journal record, an eviction's marked
// with why.
func noteOf(rec cachepool.Record, why EvictReason) itemNote {
	n := itemNote{key: rec.Key, name: rec.Name, bytes: rec.Bytes, start: rec.Start, end: rec.End}
	if rec.Evicted {
		n.reason = why
	}
	return n
}
