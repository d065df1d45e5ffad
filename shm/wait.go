package shm

import (
	"fmt"
	"sync"
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
// WaitGen does not spin. On a reader's window ([Open]), on Linux, it sleeps
// in the kernel on a futex over the generation's word of the shared mapping
// (see layout.go), which works on the read-only mapping: every
// [Window.Publish] that changes the set wakes every process waiting on the
// window, within microseconds. A signal, or a wake that finds the
// generation still short of gen, only makes it look again and sleep for
// what remains of the time. Elsewhere it polls the generation every
// millisecond. Each goroutine waiting there holds an OS thread while it
// sleeps, as any blocking system call does: the Go scheduler gives the
// goroutines queued behind it to another thread only when its monitor
// next looks.
//
// On the writer's own window ([Create]) only this process publishes, and a
// waiting goroutine sleeps in the Go scheduler, holding no thread: Publish,
// Nudge and Close wake it as a channel would.
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
	if w.writable {
		return w.waitLocal(gen, deadline, nudges)
	}
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
	w.local.broadcast()
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
		w.local.broadcast()
		w.life.RLock()
		if !w.closed {
			wakeAll(w.h.genWord)
		}
		w.life.RUnlock()
		time.Sleep(20 * time.Microsecond)
	}
}

// waitLocal is WaitGen on the writer's window, whose publishes are this
// process's: it waits on a channel that Publish, Nudge and Close close. It
// takes the channel before it looks at the generation, so that a publish
// after the look closes the channel it waits on. w.life is held shared.
func (w *Window) waitLocal(gen uint64, deadline time.Time, nudges uint64) (uint64, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		woken := w.local.wait()
		cur := w.h.seq.Load()
		switch {
		case cur >= gen:
			return cur, nil
		case w.closing.Load():
			return 0, ErrClosed
		case w.nudges.Load() != nudges:
			return cur, ErrNudged
		}
		var timeout <-chan time.Time
		if !deadline.IsZero() {
			d := time.Until(deadline)
			if d <= 0 {
				return cur, ErrDeadline
			}
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			timeout = timer.C
		}
		select {
		case <-woken:
		case <-timeout:
		}
	}
}

// localWake wakes every goroutine of this process that waits on it: wait
// returns a channel that the next broadcast closes.
type localWake struct {
	mu sync.Mutex
	ch chan struct{}
}

func (k *localWake) wait() <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ch == nil {
		k.ch = make(chan struct{})
	}
	return k.ch
}

// broadcast wakes the waiters; with none it costs a lock.
func (k *localWake) broadcast() {
	k.mu.Lock()
	if k.ch != nil {
		close(k.ch)
		k.ch = nil
	}
	k.mu.Unlock()
}
