//go:build linux

package shm

import (
	"math"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The futex operations of linux/futex.h, which golang.org/x/sys/unix does not
// name. The private variants (flag 128) are not used on purpose: they key a
// wait on the calling process's address space, while the writer and the
// readers are different processes that share the word through MAP_SHARED
// mappings of one file. A shared futex is keyed on the file and offset, so a
// wake reaches every process, and a read-only mapping is enough for both
// calls (the kernel only reads the word).
const (
	futexWait = 0
	futexWake = 1
)

// sleepOn sleeps while the 32-bit word at addr holds val: until a wake, for
// at most d (no limit when d < 0). It returns nil when it was woken, when the
// word no longer held val (EAGAIN), when a signal interrupted it (EINTR) and
// when the time ran out (ETIMEDOUT): in every case the caller looks at the
// generation again. It returns any other error of the system call.
func sleepOn(addr *uint32, val uint32, d time.Duration) error {
	var errno unix.Errno
	if d < 0 {
		_, _, errno = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait, uintptr(val), 0, 0, 0)
	} else {
		ts := unix.NsecToTimespec(int64(d))
		_, _, errno = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait, uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
	}
	switch errno {
	case 0, unix.EAGAIN, unix.EINTR, unix.ETIMEDOUT:
		return nil
	}
	return errno
}

// wakeAll wakes every thread, in any process, that sleeps on the word at
// addr. With nobody asleep it costs one system call. It cannot fail while the
// word is mapped, and a failed wake would only leave a waiter to its
// deadline, so its result is ignored.
func wakeAll(addr *uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWake, math.MaxInt32, 0, 0, 0)
}
