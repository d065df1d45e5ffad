package engine

import (
	"context"
	"time"

	"github.com/poolrun/poolrun/cachepool"
)

// The seam between the scheduler and the workers. The scheduler knows a
// worker only as a link that takes typed messages, and hears from it only
// through msgs on one channel. Three links implement it, none a mode of
// another: a worker process over OS pipes (processLink, link_process.go),
// a worker the pool did not start, over byte streams its transport
// carries (streamLink, link_stream.go: Admit and Serve, which package
// cluster uses), and a goroutine of this process that takes typed tasks
// and gives typed replies over channels (localLink, link_local.go: serial
// mode and InProcess). The first two speak the frames of wire.go
// (framelink.go); the third encodes no message, only the jobs' values
// (codec.go), as the others do.

// A transport starts workers and carries their messages. Each worker it
// starts or admits reports, in order on the transport's channel, its hello,
// then its notes, states and bye, and at last died: nothing follows died.
type transport interface {
	// start starts a worker for place index, reading window win (made by
	// the transport's newWindow). The worker says hello when it is
	// ready; a transport whose workers join on their own may refuse.
	start(index int, win windowPublisher) (link, error)
	// newWindow makes a window the transport's workers can read.
	newWindow() (windowPublisher, error)
	// close releases what the transport holds; every worker has gone.
	close()
}

// A link is the scheduler's handle on one worker. Its methods never block
// on the worker and may be called until the worker's died message.
type link interface {
	// send hands the worker jobs to run in order. The tasks may be reused
	// by the caller as soon as send returns.
	send(tasks []task)
	// stop asks the worker to finish the jobs it was sent, clear its cache
	// (running the items' cleanups), say bye and exit.
	stop()
	// terminate asks the worker to stop now (its running job's context is
	// cancelled) and kills it if it has not gone after grace.
	terminate(grace time.Duration)
	// pid is the worker's process id where the transport knows it before
	// the hello (which tells it in any case), else 0.
	pid() int
	// cancel asks the worker to cancel job id, sent to it earlier: to
	// cancel its context if it runs, or to skip it if it has not started.
	// Either way the worker replies to it.
	cancel(id uint64)
	// revoke asks the worker to hand job id, the seq-th job sent to it
	// (from 1), back if it has not started it: it replies to the job at
	// once with outcomeRevoked, and skips it when it comes to it; or, if
	// the job has started, it replies to it as it would have anyway.
	revoke(id, seq uint64)
}

// A msg is one thing a worker said, or its end. Exactly one of hello,
// notes, state, bye, alive, died and pull is set.
type msg struct {
	from  link
	hello *hello
	notes []note       // jobs started and finished, in the worker's order
	state *workerState // what an idle worker evicted
	bye   *byeInfo
	alive bool  // a busy worker lives
	died  error // the worker is gone, and why
	// pull, from a local link, takes what its worker said since its last
	// pull, which the scheduler handles in order.
	pull func() []msg
	// lastWords are, with died, the last lines the worker wrote to its
	// stderr, where the transport knows them.
	lastWords string
}

// workerParams are what a worker learns in the handshake, and echoes: how
// it manages its cache.
type workerParams struct {
	policy   EvictPolicy
	budget   int64 // cache bytes, see CacheBudget; 0: none
	idle     bool  // follow the window while waiting for a job
	maxValue int64 // the largest encoded result, see MaxValueSize
	// heartbeat is how often a busy worker says that it lives (see
	// SilenceLimit); 0: never.
	heartbeat time.Duration
	items     itemsMode // undeclared items: noted, failed, or let be
}

// residentItem is an item a worker holds, with its size (as its Size
// function reported it; 0 without one).
type residentItem struct {
	key   uint64
	bytes int64
}

// workerState is what an idle worker reports after it evicted items.
type workerState struct {
	evicted  int
	stats    cachepool.Stats
	resident []residentItem
	items    []itemNote // the builds and evictions since the last report
}

// byeInfo is what a worker reports when it stops: its cache's final
// statistics and the peak of its resident memory (VmHWM; 0 where
// unknown).
type byeInfo struct {
	stats   cachepool.Stats
	peakRSS int64
	items   []itemNote // the builds and evictions since the last report
}

// hello is what a worker says when it is ready to serve. A worker that
// joined by itself brings the window it reads (made by its transport's
// newWindow); the scheduler made those of the workers it started.
type hello struct {
	pid  int
	host string // of a worker that joined from elsewhere (RemoteWorker.Host)
	win  windowPublisher
}

// A note says that a job began on its worker (started, its id, at the
// pool's time at in Unix ns; 0: when the note came), or ended (ended, and
// done is its reply), or both: a short job's start comes with its end.
// The reply is held by value, so that a batch of notes is one allocation,
// which the link that filled it reuses once the scheduler has handled it
// (pulled).
type note struct {
	started uint64
	at      int64
	ended   bool
	done    reply
}

// joinStart puts r, the reply to a job, in the last note of ms if that
// note says that the job started and no more: a short job's start and end
// in one note, which costs the scheduler one note. It reports whether it
// did.
func joinStart(ms []msg, r *reply) bool {
	if len(ms) == 0 {
		return false
	}
	ns := ms[len(ms)-1].notes
	if len(ns) == 0 {
		return false
	}
	if n := &ns[len(ns)-1]; n.started == r.id && !n.ended {
		n.ended, n.done = true, *r
		return true
	}
	return false
}

// pulled is what a link's last pull returned. The scheduler has handled
// it by the time of the link's next pull, which reuses its room: the
// slice of messages, and a batch of notes.
type pulled struct {
	msgs  []msg
	notes []note // an emptied batch, for the next notes
}

// swap records ms as pulled and returns the room of the pull before, as
// an empty slice of messages.
func (p *pulled) swap(ms []msg) []msg {
	prev := p.msgs
	for i := range prev {
		if ns := prev[i].notes; cap(ns) > cap(p.notes) {
			clear(ns) // nothing handled stays reachable from the batch
			p.notes = ns[:0]
		}
	}
	clear(prev)
	p.msgs = ms
	return prev[:0]
}

// batch returns an empty batch of notes of room n at least: the one that
// swap kept, or a new one.
func (p *pulled) batch(n int) []note {
	b := p.notes
	p.notes = nil
	if cap(b) < n {
		return make([]note, 0, n)
	}
	return b
}

// task is one job as a worker sees it.
type task struct {
	id   uint64
	gen  uint64 // the worker must see at least this window generation
	fn   string
	arg  []byte
	keys []uint64 // the items the job needs
	// order lists, with a cache budget, the worker's items that the job
	// does not need, the one whose next use lies furthest ahead first.
	order []uint64
	// timeout bounds the job's run time, from when the worker starts it
	// (see Timeout); 0: none.
	timeout time.Duration
	// attempt numbers the job's runs, from 1 (see [Attempt]).
	attempt int
	// cancelled: the parent cancelled the job before it started (the
	// worker's side only).
	cancelled bool
}

// Outcomes of a job, in a reply.
const (
	outcomeOK byte = iota
	outcomeError
	outcomePanic
	// The job's context ended before it returned, whatever it returned:
	// its timeout passed, or the parent cancelled it (payload: why).
	outcomeTimedOut
	outcomeCancelled
	// The job did not start: the parent took it back (link.revoke).
	outcomeRevoked
	// The worker's own context ended while the job ran (it was asked to
	// leave: SIGTERM), and the job returned an error or panicked rather
	// than a value (payload: what it returned). The job was not done; the
	// parent treats it as a job whose worker died under it.
	outcomeLeft
)

// reply is a worker's report of one finished job.
type reply struct {
	id      uint64
	outcome byte
	start   time.Time
	elapsed time.Duration
	payload []byte // result (gob) for outcomeOK, message otherwise
	stack   []byte // outcomePanic only
	stats   cachepool.Stats
	evicted int // items evicted for this job: before it ran, and after it under EvictEachJob
	// budgetEvicted counts the items evicted to stay within the cache
	// budget; overBudget says that the job's own items exceeded it.
	budgetEvicted int
	overBudget    bool
	// held is what the cache held when the job returned, before the
	// policy's clear (EvictEachJob), so that the parent sees that peak.
	held int64
	// resident is the worker's resident set after the job, sent when it
	// changed since the last report (residentSent).
	residentSent bool
	resident     []residentItem
	// items are the builds and evictions since the last report: the
	// job's builds, and the evictions before and after it.
	items []itemNote
	// undeclared lists the items the job got without declaring them
	// (see LearnItems), each once.
	undeclared []cachepool.Undeclared
}

// workerConn is a worker's side of a transport: the serve loop reads tasks
// from it and writes replies to it. The handshake is done when serve gets
// it.
type workerConn interface {
	// next returns the next task, or stop (true) when the parent asks the
	// worker to stop; io.EOF when the parent is gone. A task the parent
	// has cancelled is returned with cancelled set. The task is the
	// worker's until the next call.
	next() (t *task, stop bool, err error)
	// ready reports whether next would return without waiting.
	ready() bool
	// running says which task runs now (0: none), and cancel cancels it:
	// a cancel for that task from the parent calls cancel.
	running(id uint64, cancel context.CancelCauseFunc)
	// control is the worker's record of cancels and revokes.
	control() *jobControl
	// started tells the parent that job id began at (by the worker's
	// clock, which a transport may not pass on).
	started(id uint64, at time.Time) error
	// alive tells the parent that the worker lives; it may be called from
	// another goroutine, as state may.
	alive() error
	// done reports a finished job; r is the caller's again when done
	// returns. The report may be held back (by a local worker, whose
	// notes outlive it) until the worker waits for a task, or release.
	done(r *reply) error
	// release sends what is held back.
	release() error
	// state reports what the worker evicted while idle; it may be called
	// from another goroutine than the others.
	state(s *workerState) error
	// bye reports the cache's final statistics; nothing follows.
	bye(b *byeInfo) error
}
