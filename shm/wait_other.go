//go:build !linux

package shm

import "time"

// pollInterval is how long a waiter sleeps between two looks at the
// generation where there is no futex shared between processes to sleep on.
// It bounds how late [Window.WaitGen] notices a publish or a [Window.Close].
const pollInterval = time.Millisecond

// sleepOn sleeps for pollInterval, or d if that is shorter and d >= 0: the
// polling fallback of the futex wait of wait_linux.go. It never fails.
func sleepOn(_ *uint32, _ uint32, d time.Duration) error {
	if d < 0 || d > pollInterval {
		d = pollInterval
	}
	time.Sleep(d)
	return nil
}

// wakeAll does nothing: waiters poll.
func wakeAll(*uint32) {}
