//go:build linux

package cli

import (
	"os"

	"golang.org/x/sys/unix"
)

// terminal reports whether f is a terminal: whether it has terminal
// attributes, which /dev/null, a character device too, has not.
func terminal(f *os.File) bool {
	sc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	sc.Control(func(fd uintptr) {
		_, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
		ok = err == nil
	})
	return ok
}
