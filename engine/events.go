package engine

import (
	"fmt"
	"sync"
	"time"
)

// EventKind says what an [Event] reports.
type EventKind int

const (
	// PoolChanged: the pool changed state; the new one is in Event.Pool.
	PoolChanged EventKind = iota
	// JobAdded: a job was queued; its status is in New.
	JobAdded
	// JobStatus: a job went from Old to New.
	JobStatus
	// TickEvent: nothing else happened for the period given to [Tick].
	// (The option has the short name.)
	TickEvent
	// BudgetExceeded: a job's own items took its worker's cache past the
	// budget set with [CacheBudget] (JobID, Worker, and CacheBytes).
	BudgetExceeded
	// WorkerDied: a worker ended other than by the pool's normal stop: it
	// died, was killed (for a timeout, a cancel or its silence), or was
	// terminated because the pool stopped early, or left the pool when it
	// was asked to stop (a worker that joined it from another host) (Worker,
	// PID, and the end in Err). Its place is filled again while the pool
	// runs, but for one that joined, one that did not answer its handshake
	// in time, and after a crash loop (see [ErrCrashLoop]).
	WorkerDied
	// WindowOverflow: the unfinished jobs need more distinct items (Items)
	// than a window has slots (Capacity, see [WindowCapacity]); the
	// workers that read it keep every item they build until it fits
	// again. Worker is the worker whose window it is with [EvictStale],
	// 0 for the pool's one window with other policies.
	WindowOverflow
	// WindowFits: the window that overflowed holds the needed items again
	// (Items, Capacity, Worker as for WindowOverflow); its workers evict
	// what it no longer lists.
	WindowFits
	// JobStarted: a Running job began on its worker (JobID, Func, Labels,
	// Worker, Attempt): Running says that it was sent, and a worker
	// that is sent short jobs ahead runs them one after the other.
	JobStarted
	// ItemBuilt: a worker built an item (Worker, Item, ItemBytes, and
	// ItemStart and ItemEnd, when the build began and ended). Workers
	// report their builds with their replies, so the event comes at the
	// end of the job that built the item, or later.
	ItemBuilt
	// ItemEvicted: a worker evicted an item (Worker, Item, ItemBytes,
	// Reason, and ItemStart and ItemEnd, both when it was evicted).
	// Evictions at the end of the pool come with the workers' goodbyes;
	// a worker that dies reports none for the items it held.
	ItemEvicted
	// ItemLearned: a job of Func got the item Item (its name) without
	// declaring it, the first time for that function (JobID, Labels,
	// Worker: that job's): the pool now counts the item as needed by the
	// function's unfinished jobs (see Functions, jobs and items in the
	// package documentation). For a member of a
	// cachepool.Family, whose name varies from job to job, it only says
	// so, once per function and family.
	ItemLearned
)

var kindNames = [...]string{"pool", "added", "status", "tick", "budget", "died", "overflow", "fits", "started", "built", "evicted", "learned"}

func (k EventKind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// An Event reports progress to the listeners given with [OnEvent].
type Event struct {
	Kind EventKind
	Time time.Time

	// Pool is the pool's state (every kind).
	Pool PoolState

	// For JobAdded and JobStatus: the job, its function's name and labels,
	// and its status before and after. Worker is the worker the job ran on
	// (from 1; 0 before it runs, and in serial mode 1). Err is the job's
	// error once it is Failed, Cancelled or Aborted.
	JobID    int
	Func     string
	Labels   map[string]string
	Old, New Status
	Worker   int
	Err      error
	// Attempt numbers the job's runs, from 1 (0 before it first runs):
	// a job run again after its worker died (see [Retries]), or after a
	// failed run (see [RetryFailures]), goes from Running back to Queued,
	// with the death or the failure in Err, and runs again as attempt 2.
	Attempt int
	// PID is the worker's process id (WorkerDied).
	PID int
	// Items and Capacity: the distinct items a window was to list, and its
	// slots (WindowOverflow, WindowFits).
	Items, Capacity int
	// Item is the name of the item built, evicted or learned, ItemBytes its size
	// (by its Size function; 0 without one), ItemStart and ItemEnd the
	// times of its build or eviction, by the pool's clock (a remote
	// worker's are shifted by the time its message took), and Reason why
	// it was evicted (ItemBuilt, ItemEvicted; ItemLearned has Item alone).
	Item               string
	ItemBytes          int64
	ItemStart, ItemEnd time.Time
	Reason             EvictReason
	// item carries the item fields from emit to the listener.
	item *itemNote

	// Counts holds the number of jobs in each status after the event,
	// indexed by Status. CacheBytes is the memory that items resident in the
	// workers' caches held at their last report (where items report sizes).
	Counts     [numStatuses]int
	CacheBytes int64
}

// Total returns the number of jobs in the pool when the event was made.
func (e Event) Total() int {
	n := 0
	for _, c := range e.Counts {
		n += c
	}
	return n
}

// events queues a pool's events for delivery to its listeners, so that the
// scheduler never waits for a listener. The queue holds them in a compact
// form (events of the jobs queued before Run wait there until Run starts
// delivering: two per job), in chunks of eventChunk records: a queue that
// grows is never copied, and the chunks delivered are used again.
type events struct {
	mu     sync.Mutex
	cond   *sync.Cond
	queue  [][]eventRecord // in order; the last may have room
	free   [][]eventRecord // delivered chunks, empty, for the queue to reuse
	closed bool
}

// eventChunk is the number of records in a chunk of the event queue: some
// 15 KiB, below the sizes the Go allocator treats as large.
const eventChunk = 128

// push adds r to the queue. q.mu is held.
func (q *events) push(r eventRecord) {
	if n := len(q.queue); n == 0 || len(q.queue[n-1]) == eventChunk {
		var c []eventRecord
		if k := len(q.free); k > 0 {
			c, q.free = q.free[k-1], q.free[:k-1]
		} else {
			c = make([]eventRecord, 0, eventChunk)
		}
		q.queue = append(q.queue, c)
	}
	last := &q.queue[len(q.queue)-1]
	*last = append(*last, r)
}

// eventRecord is an Event as it waits in the queue: about half the size.
type eventRecord struct {
	fn                                    string
	labels                                map[string]string
	err                                   error
	time                                  int64 // Unix ns
	cacheBytes                            int64
	jobID                                 int64
	worker, attempt, pid, items, capacity int32
	counts                                [numStatuses]int32
	kind, pool, old, new                  uint8
	item                                  *itemNote // ItemBuilt, ItemEvicted
}

func (r *eventRecord) event() Event {
	e := Event{Kind: EventKind(r.kind), Time: time.Unix(0, r.time), Pool: PoolState(r.pool), JobID: int(r.jobID), Func: r.fn, Labels: r.labels,
		Old: Status(r.old), New: Status(r.new), Worker: int(r.worker), Err: r.err, Attempt: int(r.attempt), PID: int(r.pid),
		Items: int(r.items), Capacity: int(r.capacity), CacheBytes: r.cacheBytes}
	for i, c := range r.counts {
		e.Counts[i] = int(c)
	}
	if r.item != nil {
		r.item.fill(&e)
	}
	return e
}

// emit records an event for the listeners, stamped with the pool's state,
// counts and cache bytes. p.mu is held.
func (p *Pool) emit(e Event) {
	if p.cfg.listener == nil {
		return
	}
	now := time.Now()
	r := eventRecord{fn: e.Func, labels: e.Labels, err: e.Err, time: now.UnixNano(), jobID: int64(e.JobID),
		worker: int32(e.Worker), attempt: int32(e.Attempt), pid: int32(e.PID), items: int32(e.Items), capacity: int32(e.Capacity),
		kind: uint8(e.Kind), pool: uint8(p.state), old: uint8(e.Old), new: uint8(e.New), item: e.item}
	for i, c := range p.counts {
		r.counts[i] = int32(c)
	}
	if p.sched != nil {
		r.cacheBytes = p.sched.cacheBytes()
	}
	p.lastEvent = now
	p.ev.mu.Lock()
	p.ev.push(r)
	p.ev.mu.Unlock()
	p.ev.cond.Signal()
}

// setState moves the pool to state s and reports it. p.mu is held.
func (p *Pool) setState(s PoolState) {
	p.state = s
	p.emit(Event{Kind: PoolChanged})
}

// deliver calls the listener with every event, in order, until the queue
// is closed and empty; then it closes done.
func (p *Pool) deliver(done chan<- struct{}) {
	defer close(done)
	var batch [][]eventRecord
	q := &p.ev
	for {
		q.mu.Lock()
		for len(q.queue) == 0 && !q.closed {
			q.cond.Wait()
		}
		if len(q.queue) == 0 && q.closed {
			q.mu.Unlock()
			return
		}
		batch, q.queue = q.queue, batch[:0]
		q.mu.Unlock()
		for _, c := range batch {
			for i := range c {
				p.cfg.listener(c[i].event())
			}
			clear(c)
		}
		q.mu.Lock()
		for _, c := range batch {
			// A few chunks are kept: as many as a busy pool fills between
			// two deliveries, not the thousands of a large queue at Run.
			if len(q.free) < 4 {
				q.free = append(q.free, c[:0])
			}
		}
		q.mu.Unlock()
		clear(batch)
	}
}

// closeEvents ends delivery once the queued events are delivered.
func (p *Pool) closeEvents() {
	p.ev.mu.Lock()
	p.ev.closed = true
	p.ev.mu.Unlock()
	p.ev.cond.Signal()
}
