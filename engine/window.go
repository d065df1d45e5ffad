package engine

import (
	"errors"
	"time"

	"github.com/poolrun/poolrun/shm"
)

// The window, as the scheduler and the workers see it. The parent publishes
// the set of required keys; a worker reads it on its own schedule. Today
// both are a window in shared memory ([shm.Window]); a transport that
// reaches other hosts carries the set its own way behind the same two
// interfaces.

// publisher is the parent's side of the window.
type publisher interface {
	// publish replaces the set of required keys. More keys than the window
	// holds is not an error: the window then says "keep everything", and
	// publish reports it (over).
	publish(keys []uint64) (over bool)
	// gen is the window's generation: it grows with every publish that
	// changes the set. A job sent with generation g must not run on an
	// older view of the window.
	gen() uint64
	// publishes counts the publishes that changed the set.
	publishes() uint64
	// close releases the window; afterwards gen and publishes keep the
	// last figures.
	close() publisher
}

// windowView is a worker's side of the window, whoever makes it.
type windowView = WindowReader

// shmPublisher publishes in a window in shared memory. Once the window is
// closed it keeps answering with the figures it had.
type shmPublisher struct {
	w *shm.Window
}

func (s shmPublisher) publish(keys []uint64) bool {
	// An overflow is not an error: the window says "keep everything".
	_, err := s.w.Publish(keys)
	return errors.Is(err, shm.ErrOverflow)
}

func (s shmPublisher) gen() uint64       { return s.w.Gen() }
func (s shmPublisher) publishes() uint64 { return s.w.Publishes() }

func (s shmPublisher) close() publisher {
	c := closedWindow{s.w.Gen(), s.w.Publishes()}
	s.w.Close()
	return c
}

// shmView is a worker's view of a window in shared memory.
type shmView struct {
	*shm.Window
}

// WaitGen sleeps on the window's generation word (a futex, on Linux) until
// the generation reaches gen. The parent publishes before it sends a job,
// so a worker that sees the job before the publish sees only a reordering
// of the two on one host, which lasts microseconds.
func (v shmView) WaitGen(gen uint64, deadline time.Time) bool {
	_, err := v.Window.WaitGen(gen, deadline)
	return err == nil
}

// closedWindow stands for a window that was closed at the end of a pool: it
// keeps the figures the window had for [Pool.Stats].
type closedWindow struct{ g, n uint64 }

func (c closedWindow) publish([]uint64) bool { return false }
func (c closedWindow) gen() uint64           { return c.g }
func (c closedWindow) publishes() uint64     { return c.n }
func (c closedWindow) close() publisher      { return c }

// WaitChange sleeps on the window's generation word until a publish
// after generation after has begun (the generation is odd while one is
// under way; Snapshot then waits for it to end).
func (v shmView) WaitChange(after uint64, deadline time.Time) uint64 {
	g, _ := v.Window.WaitGen(after+1, deadline)
	if g == 0 {
		return v.Gen()
	}
	return g
}
