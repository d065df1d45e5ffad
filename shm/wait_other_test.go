//go:build !linux

package shm_test

// sharedFutexSleepers cannot tell where there is no /proc: the tests then
// give waiters time to fall asleep instead of watching them do so.
func sharedFutexSleepers(pid int) (n int, ok bool) { return 0, false }
