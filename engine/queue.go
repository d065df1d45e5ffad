package engine

import "encoding/binary"

// readyQueue holds the Queued jobs in groups of jobs that need the same set
// of items, jobs in a group lowest id first, groups in the order of their
// lowest id. Without affinity the dispatcher takes the lowest id of all:
// among the jobs whose dependencies are met, the one queued first starts
// first. With affinity it may take, for a given worker, the first job of a
// later group (see scheduler.choose). Jobs that have left the Queued status
// meanwhile (cancelled) stay in the queue until they reach the front of
// their group, where they are dropped.
//
// Dispatching in queue order, rather than in the order dependencies
// happened to be met, keeps the jobs that share an item together: a
// workload queued item by item finishes with one item before it needs the
// next, so the window lets workers free the first.
type readyQueue struct {
	groups map[string]*readyGroup // by the key set of their jobs
	heads  []*readyGroup          // a min-heap by each group's lowest id

	// passed counts the times affinity passed over job passedID, the
	// oldest ready job.
	passedID, passed int
}

// readyGroup is the Queued jobs that need one set of items.
type readyGroup struct {
	sig  string   // the key set, as bytes
	keys []uint64 // the key set
	jobs []*job   // a min-heap by id (see sorted)
	at   int      // index in heads

	// sorted says that jobs is in increasing order of id, which makes it
	// a min-heap too. While every job pushed comes after those there (jobs
	// queued in order, or released in order by their dependencies), a push
	// appends and a pop takes the first, each in constant time; a heap's
	// pop costs a walk of log n jobs scattered in memory. The first job
	// pushed out of order (one sent back by a worker's death, one released
	// early) makes the group a heap until it empties.
	sorted bool
}

// sigOf returns the bytes of a sorted key set, a group's name. It is
// computed once per registered function and per job that adds items of its
// own (funcEntry.sig, job.sig), not on every push.
func sigOf(keys []uint64) string {
	if len(keys) == 0 {
		return ""
	}
	b := make([]byte, 0, 8*len(keys))
	for _, k := range keys {
		b = binary.LittleEndian.AppendUint64(b, k)
	}
	return string(b)
}

func (q *readyQueue) push(j *job) {
	if q.groups == nil {
		q.groups = map[string]*readyGroup{}
	}
	sig := j.sig
	g := q.groups[sig]
	if g == nil {
		g = &readyGroup{sig: sig, keys: j.keys, at: -1, sorted: true}
		q.groups[sig] = g
	}
	g.push(j)
	if g.at < 0 {
		g.at = len(q.heads)
		q.heads = append(q.heads, g)
		q.up(g.at)
	} else if g.jobs[0] == j {
		q.up(g.at)
	}
}

// peek returns the job with the lowest id, or nil.
func (q *readyQueue) peek() *job {
	if len(q.heads) == 0 {
		return nil
	}
	return q.heads[0].jobs[0]
}

// pop removes the job with the lowest id.
func (q *readyQueue) pop() { q.popFrom(q.heads[0]) }

// popFrom removes the lowest id of group g.
func (q *readyQueue) popFrom(g *readyGroup) {
	g.pop()
	if len(g.jobs) > 0 {
		q.down(g.at)
		return
	}
	// The group is empty: out of the heap and the map.
	i, last := g.at, len(q.heads)-1
	if i != last {
		q.swap(i, last)
	}
	q.heads[last] = nil
	q.heads = q.heads[:last]
	if i != last {
		q.down(i)
		q.up(i)
	}
	g.at = -1
	delete(q.groups, g.sig)
}

// firstGroups appends to dst up to n groups in the order of their lowest
// id, the first group first. It costs O(n log n).
func (q *readyQueue) firstGroups(dst []*readyGroup, n int) []*readyGroup {
	if len(q.heads) == 0 || n <= 0 {
		return dst
	}
	// A best-first walk of the heap: a frontier of heap indices, itself
	// kept sorted by head id (n is small).
	frontier := []int{0}
	for len(frontier) > 0 && n > 0 {
		best := 0
		for i := 1; i < len(frontier); i++ {
			if q.less(frontier[i], frontier[best]) {
				best = i
			}
		}
		at := frontier[best]
		frontier[best] = frontier[len(frontier)-1]
		frontier = frontier[:len(frontier)-1]
		dst = append(dst, q.heads[at])
		n--
		for _, c := range [2]int{2*at + 1, 2*at + 2} {
			if c < len(q.heads) {
				frontier = append(frontier, c)
			}
		}
	}
	return dst
}

func (q *readyQueue) less(a, b int) bool { return q.heads[a].jobs[0].id < q.heads[b].jobs[0].id }

func (q *readyQueue) swap(a, b int) {
	h := q.heads
	h[a], h[b] = h[b], h[a]
	h[a].at, h[b].at = a, b
}

func (q *readyQueue) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			break
		}
		q.swap(i, parent)
		i = parent
	}
}

func (q *readyQueue) down(i int) {
	n := len(q.heads)
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && q.less(l, m) {
			m = l
		}
		if r < n && q.less(r, m) {
			m = r
		}
		if m == i {
			return
		}
		q.swap(i, m)
		i = m
	}
}

// push adds j to the group's jobs.
func (g *readyGroup) push(j *job) {
	if n := len(g.jobs); g.sorted && (n == 0 || g.jobs[n-1].id < j.id) {
		g.jobs = append(g.jobs, j)
		return
	}
	g.sorted = false
	jobsPush(&g.jobs, j)
}

// pop removes the group's job with the lowest id.
func (g *readyGroup) pop() {
	if g.sorted {
		g.jobs[0] = nil // the array keeps no job alive that has left
		g.jobs = g.jobs[1:]
		return
	}
	jobsPop(&g.jobs)
}

// jobsPush and jobsPop keep a min-heap of jobs by id.
func jobsPush(h *[]*job, j *job) {
	*h = append(*h, j)
	s := *h
	i := len(s) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if s[parent].id <= s[i].id {
			break
		}
		s[parent], s[i] = s[i], s[parent]
		i = parent
	}
}

func jobsPop(h *[]*job) {
	s := *h
	n := len(s) - 1
	s[0] = s[n]
	s[n] = nil
	s = s[:n]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && s[l].id < s[m].id {
			m = l
		}
		if r < n && s[r].id < s[m].id {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
}
