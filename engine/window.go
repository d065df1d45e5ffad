package engine

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/poolrun/poolrun/shm"
)

// The window, as the scheduler and the workers see it: one interface per
// side. The scheduler publishes the set of required keys through a
// WindowPublisher; a worker reads it on its own schedule through a
// WindowReader. The engine's transports make windows in shared memory
// ([shm.Window]); a transport that reaches other hosts (package cluster)
// makes its own and hands them over with [Pool.Admit] and [Serve]. A
// transport owns the window type it makes: nothing else looks behind the
// interfaces.

// A WindowPublisher is the pool's side of a window.
//
// Only the pool's scheduler publishes, one publish at a time, and never
// while it holds the pool's lock: Publish may take as long as its transport
// needs (a network round trip, say) without holding up Queue, Stats or
// Cancel.
type WindowPublisher interface {
	// Publish replaces the set of required keys and reports whether it
	// holds more keys than the window has room for (the window then says
	// "keep everything").
	Publish(keys []uint64) (over bool)
	// Gen is the window's generation, which grows with every Publish that
	// changes the set: a job sent with generation g must not run on an
	// older view of the window.
	Gen() uint64
	// Publishes counts the publishes that changed the set.
	Publishes() uint64
	// Close releases the window; Gen and Publishes keep their last
	// figures.
	Close()
}

// A WindowReader is a worker's side of a window: the engine's own, in
// shared memory, or one a transport makes ([Serve]).
type WindowReader interface {
	// Gen returns the generation the worker can see now.
	Gen() uint64
	// Snapshot copies the set (into dst's room) with its generation.
	Snapshot(dst []uint64) (shm.Snapshot, error)
	// WaitGen waits until the generation is at least gen or deadline has
	// passed, and reports whether it got there. On false the worker keeps
	// every item: it cannot tell which are still needed.
	WaitGen(gen uint64, deadline time.Time) bool
	// WaitChange sleeps until the generation differs from after or
	// deadline has passed, and returns the generation.
	WaitChange(after uint64, deadline time.Time) uint64
}

// shmWindow is the engine's window: shared memory that its workers map
// (a worker process through an inherited descriptor). Once closed it keeps
// answering with the figures it had.
type shmWindow struct {
	mu        sync.Mutex // guards w against Close
	w         *shm.Window
	gen, pubs uint64 // after Close
}

func (s *shmWindow) Publish(keys []uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return false
	}
	// An overflow is not an error: the window says "keep everything".
	_, err := s.w.Publish(keys)
	return errors.Is(err, shm.ErrOverflow)
}

func (s *shmWindow) Gen() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return s.gen
	}
	return s.w.Gen()
}

func (s *shmWindow) Publishes() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return s.pubs
	}
	return s.w.Publishes()
}

func (s *shmWindow) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w != nil {
		s.gen, s.pubs = s.w.Gen(), s.w.Publishes()
		s.w.Close()
		s.w = nil
	}
}

// shmWindows makes the shared-memory windows of a transport and finds, for
// a window it made, the memory behind it.
type shmWindows struct {
	capacity int
	mu       sync.Mutex
	made     map[WindowPublisher]*shm.Window
}

func (ws *shmWindows) create() (WindowPublisher, error) {
	w, err := shm.Create(ws.capacity)
	if err != nil {
		return nil, fmt.Errorf("engine: creating a window: %w", err)
	}
	pub := &shmWindow{w: w}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.made == nil {
		ws.made = map[WindowPublisher]*shm.Window{}
	}
	ws.made[pub] = w
	return pub, nil
}

// of returns the memory of win, which ws made; nil for any other window.
func (ws *shmWindows) of(win WindowPublisher) *shm.Window {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.made[win]
}

// NewWindowReader returns a worker's view of w, a window in shared memory,
// as the engine's worker processes read theirs: for a transport that
// serves workers in its own process with [Serve] beside windows it writes
// (shm.Window.PublishAt).
func NewWindowReader(w *shm.Window) WindowReader { return shmReader{w} }

// shmReader is a worker's view of a window in shared memory.
type shmReader struct {
	*shm.Window
}

// WaitGen sleeps on the window's generation word (a futex, on Linux) until
// the generation reaches gen. The parent publishes before it sends a job,
// so a worker that sees the job before the publish sees only a reordering
// of the two on one host, which lasts microseconds.
func (v shmReader) WaitGen(gen uint64, deadline time.Time) bool {
	_, err := v.Window.WaitGen(gen, deadline)
	return err == nil
}

// WaitChange sleeps on the window's generation word until a publish
// after generation after has begun (the generation is odd while one is
// under way; Snapshot then waits for it to end).
func (v shmReader) WaitChange(after uint64, deadline time.Time) uint64 {
	g, _ := v.Window.WaitGen(after+1, deadline)
	if g == 0 {
		return v.Gen()
	}
	return g
}
