package engine

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/poolrun/poolrun/internal/enginehost"
	"github.com/poolrun/poolrun/shm"
)

// The window, as the scheduler and the workers see it: one interface per
// side. The scheduler publishes the set of required keys through a
// windowPublisher; a worker reads it on its own schedule through a
// windowReader. The engine's transports make windows in shared memory
// ([shm.Window]). A transport that reaches other hosts (package cluster)
// makes its own publishers and hands them over with the worker it admits
// (internal/enginehost). A transport owns the window type it makes:
// nothing else looks behind the interfaces.

// windowPublisher is the pool's side of a window; its contract is in
// enginehost, where package cluster implements it.
type windowPublisher = enginehost.WindowPublisher

// A windowReader is a worker's side of a window.
type windowReader interface {
	// Gen returns the generation the worker can see now.
	Gen() uint64
	// AppendAbsent appends to dst those of keys that the set does not
	// list (none while it is overflowed), and returns them with the
	// generation of the set it looked in: one consistent set.
	AppendAbsent(dst, keys []uint64) ([]uint64, uint64, error)
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
	made     map[windowPublisher]*shm.Window
}

func (ws *shmWindows) create() (windowPublisher, error) {
	w, err := shm.Create(ws.capacity)
	if err != nil {
		return nil, fmt.Errorf("engine: creating a window: %w", err)
	}
	pub := &shmWindow{w: w}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.made == nil {
		ws.made = map[windowPublisher]*shm.Window{}
	}
	ws.made[pub] = w
	return pub, nil
}

// of returns the memory of win, which ws made; nil for any other window.
func (ws *shmWindows) of(win windowPublisher) *shm.Window {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.made[win]
}

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
