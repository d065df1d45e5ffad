package engine

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/shm"
)

// The local link: a worker is a goroutine of this process (serial mode,
// InProcess), with a cache of its own, reading a window in shared memory
// as a worker process does. Tasks and what the worker says pass as Go
// values: nothing is encoded but the jobs' arguments and results (codec.go),
// so that a job behaves as it would in a worker process.

// localTransport starts workers as goroutines of this process.
type localTransport struct {
	params  workerParams
	out     chan<- msg
	output  workerOutput // where what the jobs print through JobOutput goes
	windows shmWindows

	mu     sync.Mutex
	caches map[int]*cachepool.Cache // by place index
}

func newLocalTransport(capacity int, params workerParams, out chan<- msg, output workerOutput) *localTransport {
	return &localTransport{params: params, out: out, output: output, windows: shmWindows{capacity: capacity}, caches: map[int]*cachepool.Cache{}}
}

func (t *localTransport) newWindow() (windowPublisher, error) { return t.windows.create() }

// cache returns the cache of the worker of place index: the same for the
// worker that takes the place of one abandoned (see localLink.terminate),
// which may still run its job.
func (t *localTransport) cache(index int) *cachepool.Cache {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.caches[index]
	if c == nil {
		c = cachepool.New()
		t.caches[index] = c
	}
	return c
}

func (t *localTransport) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.caches {
		c.Clear()
	}
}

func (t *localTransport) start(index int, win windowPublisher) (link, error) {
	w := t.windows.of(win)
	if w == nil {
		return nil, errors.New("engine: a local worker reads a window of its transport's making")
	}
	return t.serve(index, w, nil), nil
}

// serve starts a worker for place index that reads w; its hello brings
// joined along, if not nil, as that of a worker that joined by itself.
func (t *localTransport) serve(index int, w *shm.Window, joined windowPublisher) *localLink {
	ctx, cancel := context.WithCancel(context.Background())
	l := &localLink{out: t.out, cancelServe: cancel, wake: make(chan struct{}, 1)}
	l.kick = msg{from: l, pull: l.pull}
	// Its jobs print through JobOutput, in whole lines, as a worker
	// process's do.
	out := &jobOutput{stdout: newLineWriter(t.output.out()), stderr: newLineWriter(t.output.err())}
	ctx = context.WithValue(ctx, jobOutputKey{}, out)
	ctx = context.WithValue(ctx, windowFileKey{}, w.File())
	cache := t.cache(index)
	go func() {
		l.say(msg{from: l, hello: &hello{pid: os.Getpid(), win: joined}})
		err := serve(ctx, &localWorker{l: l}, shmReader{w}, cache, t.params, sharedHeap, new(atomic.Bool))
		out.stdout.flush()
		out.stderr.flush()
		if err == nil {
			err = errors.New("worker goroutine ended")
		}
		l.end(err)
	}()
	return l
}

// localLink is the scheduler's link to a worker goroutine. The scheduler
// hands it tasks in a queue; the worker hands back what it says in an
// outbox, and sends the scheduler a kick (a msg that pulls the outbox),
// one at a time. Notes of jobs wait in the outbox while the worker has
// more tasks in hand, up to maxHeldNotes: the scheduler learns of a batch
// of short jobs at once, and of a job that begins with nothing behind it
// (it may run long) at once; anything else the worker says, and its
// waiting for tasks, kicks at once.
type localLink struct {
	out         chan<- msg
	kick        msg
	cancelServe context.CancelFunc // the worker's context
	wake        chan struct{}      // the worker waits on it for tasks
	ctl         jobControl
	ended       sync.Once

	mu       sync.Mutex
	queue    []task // queue[head:] are the tasks not taken yet
	head     int
	stopping bool  // asked to stop once the queue is done
	closed   bool  // terminated: the worker takes no more tasks
	outbox   []msg // what the worker said, not pulled yet
	held     int   // the notes in the outbox
	kicked   bool  // a kick is on its way: the scheduler will pull
	gone     bool  // its end was said: nothing more goes out
	pulled   pulled
}

// maxHeldNotes bounds the notes a local worker holds back.
const maxHeldNotes = 64

// add puts m in the outbox (the notes of m with those just before it) and
// reports whether the scheduler must be kicked: now, or, if m is a note
// that may wait, once the outbox holds maxHeldNotes. l.mu is held.
func (l *localLink) add(m msg, now bool) (kick bool) {
	if l.gone {
		return false
	}
	if n := len(l.outbox); n > 0 && m.notes != nil && l.outbox[n-1].notes != nil {
		l.outbox[n-1].notes = append(l.outbox[n-1].notes, m.notes...)
	} else {
		l.outbox = append(l.outbox, m)
	}
	l.held += len(m.notes)
	l.gone = m.died != nil
	return l.mustKick(now || m.notes == nil || l.held >= maxHeldNotes)
}

// mustKick reports whether to send a kick, given whether the outbox should
// be pulled now, and records it as sent. l.mu is held.
func (l *localLink) mustKick(now bool) bool {
	if !now || l.kicked || len(l.outbox) == 0 {
		return false
	}
	l.kicked = true
	return true
}

// note puts n in the outbox; idle says that the scheduler should hear of
// it at once if the worker has no task in hand.
func (l *localLink) note(n note, idle bool) {
	l.mu.Lock()
	now := idle && l.head == len(l.queue)
	var kick bool
	if k := len(l.outbox); k > 0 && l.outbox[k-1].notes != nil && !l.gone {
		l.outbox[k-1].notes = append(l.outbox[k-1].notes, n)
		l.held++
		kick = l.mustKick(now || l.held >= maxHeldNotes)
	} else {
		kick = l.add(msg{from: l, notes: append(l.pulled.batch(maxHeldNotes), n)}, now)
	}
	l.mu.Unlock()
	if kick {
		l.out <- l.kick
	}
}

// noteDone puts r, the reply to a job, in the outbox: in the note that
// says that the job started, if the scheduler has not pulled it yet, so
// that a short job costs the scheduler one note, not two.
func (l *localLink) noteDone(r *reply) {
	l.mu.Lock()
	joined := !l.gone && joinStart(l.outbox, r)
	l.mu.Unlock()
	if !joined {
		l.note(note{ended: true, done: *r}, false)
	}
}

// say puts m in the outbox and kicks the scheduler. Never from the
// scheduler's goroutine, which could wait for itself.
func (l *localLink) say(m msg) {
	l.mu.Lock()
	kick := l.add(m, true)
	l.mu.Unlock()
	if kick {
		l.out <- l.kick
	}
}

// flush kicks the scheduler if the outbox holds anything.
func (l *localLink) flush() {
	l.mu.Lock()
	kick := l.mustKick(true)
	l.mu.Unlock()
	if kick {
		l.out <- l.kick
	}
}

// pull takes what the worker said (from the scheduler's goroutine).
func (l *localLink) pull() []msg {
	l.mu.Lock()
	defer l.mu.Unlock()
	ms := l.outbox
	l.outbox, l.held, l.kicked = l.pulled.swap(ms), 0, false
	return ms
}

// end says that the worker has gone, once.
func (l *localLink) end(why error) {
	l.ended.Do(func() { l.say(msg{from: l, died: why}) })
}

func (l *localLink) wakeWorker() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *localLink) send(tasks []task) {
	l.mu.Lock()
	l.queue = append(l.queue, tasks...)
	l.mu.Unlock()
	l.wakeWorker()
}

func (l *localLink) stop() {
	l.mu.Lock()
	l.stopping = true
	l.mu.Unlock()
	l.wakeWorker()
}

func (l *localLink) pid() int { return os.Getpid() }

func (l *localLink) cancel(id uint64) { l.ctl.cancel(id) }

func (l *localLink) revoke(id, seq uint64) {
	if !l.ctl.revoke(seq) {
		return
	}
	l.mu.Lock()
	kick := l.add(msg{from: l, notes: []note{{ended: true, done: reply{id: id, outcome: outcomeRevoked}}}}, true)
	l.mu.Unlock()
	if kick {
		go func() { l.out <- l.kick }() // the scheduler calls revoke
	}
}

// terminate cancels the worker's context and takes it no more tasks. A
// goroutine cannot be killed: if its job has not returned after grace, the
// link gives up on it and says that it has gone (it goes on, unheard,
// until its job returns).
func (l *localLink) terminate(grace time.Duration) {
	l.cancelServe()
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.wakeWorker()
	give := func() {
		l.end(errors.New("abandoned: its job did not return when its context was cancelled"))
	}
	if grace <= 0 {
		go give()
	} else {
		time.AfterFunc(grace, give)
	}
}

// localWorker is the worker's side of a local link; cur is the task that
// next returned last.
type localWorker struct {
	l   *localLink
	cur task
}

func (w *localWorker) next() (*task, bool, error) {
	l := w.l
	for {
		l.mu.Lock()
		switch {
		case l.closed:
			l.mu.Unlock()
			return nil, false, io.EOF
		case l.head < len(l.queue):
			w.cur = l.queue[l.head]
			l.queue[l.head] = task{}
			if l.head++; l.head == len(l.queue) {
				l.queue, l.head = l.queue[:0], 0
			}
			l.mu.Unlock()
			if l.ctl.take() {
				continue // handed back already
			}
			w.cur.cancelled = l.ctl.cancelledEarly(w.cur.id)
			return &w.cur, false, nil
		case l.stopping:
			l.mu.Unlock()
			return nil, true, nil
		}
		l.mu.Unlock()
		l.flush() // about to wait: the scheduler hears what is held
		<-l.wake
	}
}

func (w *localWorker) ready() bool {
	l := w.l
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed || l.stopping || l.head < len(l.queue)
}

func (w *localWorker) control() *jobControl { return &w.l.ctl }

func (w *localWorker) running(id uint64, cancel context.CancelCauseFunc) {
	w.l.ctl.running(id, cancel)
}

// started notes that job id began at (the pool's clock): at once if the
// worker has no other task in hand.
func (w *localWorker) started(id uint64, at time.Time) error {
	w.l.note(note{started: id, at: at.UnixNano()}, true)
	return nil
}

func (w *localWorker) done(r *reply) error {
	w.l.noteDone(r)
	return nil
}

func (w *localWorker) release() error {
	w.l.flush()
	return nil
}

func (w *localWorker) state(s *workerState) error {
	w.l.say(msg{from: w.l, state: s})
	return nil
}

func (w *localWorker) alive() error {
	w.l.say(msg{from: w.l, alive: true})
	return nil
}

func (w *localWorker) bye(b *byeInfo) error {
	w.l.say(msg{from: w.l, bye: b})
	return nil
}
