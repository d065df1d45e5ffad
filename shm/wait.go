package shm

import (
	"fmt"
	"time"
)

// WaitGen blocks until the window's generation is at least gen, and returns
// the generation it then read, with a nil error. It returns at once when the
// generation is already there, whatever the deadline.
//
// To wait for the next publish after a snapshot s, pass s.Gen+2: the
// sequence is odd during a publish and even after it, so WaitGen then returns
// once the new set is complete, not when its publish has only begun. To wait
// for the view a job was sent with, pass the job's generation.
//
// It gives up when deadline passes (a zero deadline means none), returning
// the generation it last read and [ErrDeadline], and when the window is
// closed, in this process, before or during the wait (0 and [ErrClosed]). A
// writer that died, whether between two publishes or in the middle of one,
// leaves its readers waiting until their deadlines.
//
// WaitGen does not spin. On Linux it sleeps in the kernel on a futex over the
// generation's word of the shared mapping (see layout.go), which works on the
// read-only mapping of [Open]: every [Window.Publish] that changes the set
// wakes every process waiting on the window, within microseconds. A signal,
// or a wake that finds the generation still short of gen, only makes it look
// again and sleep for what remains of the time. Elsewhere it polls the
// generation every millisecond. Each waiting goroutine holds an OS thread
// while it sleeps, as any blocking system call does.
//
// [Window.Nudge] makes it return early, with the generation it last read
// and [ErrNudged].
//
// WaitGen is safe for concurrent use, by any number of goroutines, on the
// writer's window as on a reader's.
func (w *Window) WaitGen(gen uint64, deadline time.Time) (uint64, error) {
	w.life.RLock()
	defer w.life.RUnlock()
	if w.closed {
		return 0, ErrClosed
	}
	// Close sets closing and then counts the waiters; a waiter counts itself
	// and then looks at closing (all sequentially consistent atomics). So
	// either Close sees this waiter, and wakes it until it has left, or this
	// waiter sees closing before it sleeps.
	w.waiting.Add(1)
	defer w.waiting.Add(-1)
	nudges := w.nudges.Load()
	for {
		// No wake-up can be lost between this load and the sleep: the
		// writer stores the sequence and then wakes (see Publish), while the
		// kernel sleeps only if the word still holds the low half of cur,
		// comparing under the lock that the wake takes too. Either the store
		// came first, and the comparison fails, or the sleeper is queued
		// before the wake looks for it.
		cur := w.h.seq.Load()
		if cur >= gen {
			return cur, nil
		}
		if w.closing.Load() {
			return 0, ErrClosed
		}
		if w.nudges.Load() != nudges {
			return cur, ErrNudged
		}
		d := time.Duration(-1)
		if !deadline.IsZero() {
			if d = time.Until(deadline); d <= 0 {
				return cur, ErrDeadline
			}
		}
		if err := sleepOn(w.h.genWord, uint32(cur), d); err != nil {
			return cur, fmt.Errorf("shm: waiting for generation %d: %w", gen, err)
		}
	}
}

// Nudge makes the calls of [Window.WaitGen] of this process that wait on
// w return [ErrNudged], at once; those of other processes look at the
// generation again and sleep on (it wakes every process sleeping on the
// window, at the cost of one system call). A WaitGen that was about to
// sleep when Nudge came may miss it and sleep until its deadline: nudge
// again until the waiter is gone.
func (w *Window) Nudge() {
	w.nudges.Add(1)
	w.life.RLock()
	defer w.life.RUnlock()
	if !w.closed {
		wakeAll(w.h.genWord)
	}
}

// wakeWaiters wakes the goroutines of this process that sleep in WaitGen,
// until none is left, so that Close does not wait for their deadlines. The
// caller has set closing, so that they return instead of sleeping again. A
// wake goes to every process sleeping on the window: those of other
// processes find their generation unchanged and sleep again.
func (w *Window) wakeWaiters() {
	for w.waiting.Load() > 0 {
		w.life.RLock()
		if !w.closed {
			wakeAll(w.h.genWord)
		}
		w.life.RUnlock()
		time.Sleep(20 * time.Microsecond)
	}
}
