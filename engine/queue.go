package engine

// readyQueue holds the Queued jobs, lowest id first: among the jobs whose
// dependencies are met, the one queued first starts first. Jobs that have
// left the Queued status meanwhile (cancelled) stay in it until they reach
// the front, where the dispatcher drops them.
//
// Dispatching in queue order, rather than in the order dependencies
// happened to be met, keeps the jobs that share an item together: a
// workload queued item by item finishes with one item before it needs the
// next, so the window lets workers free the first.
type readyQueue []*job

func (q *readyQueue) push(j *job) {
	*q = append(*q, j)
	h := *q
	i := len(h) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if h[parent].id <= h[i].id {
			break
		}
		h[parent], h[i] = h[i], h[parent]
		i = parent
	}
}

// peek returns the job with the lowest id, or nil.
func (q readyQueue) peek() *job {
	if len(q) == 0 {
		return nil
	}
	return q[0]
}

// pop removes the job with the lowest id.
func (q *readyQueue) pop() {
	h := *q
	n := len(h) - 1
	h[0] = h[n]
	h[n] = nil
	h = h[:n]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && h[l].id < h[m].id {
			m = l
		}
		if r < n && h[r].id < h[m].id {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
}
