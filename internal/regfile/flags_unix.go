//go:build unix

package regfile

import "syscall"

// openFlags are added to O_RDONLY (package os adds O_CLOEXEC): do not wait
// for a FIFO's writer or a device, should the path have become one since
// it was stat'ed, and do not make a terminal the controlling one.
const openFlags = syscall.O_NONBLOCK | syscall.O_NOCTTY
