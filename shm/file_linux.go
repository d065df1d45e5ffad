//go:build linux

package shm

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// createFile returns an anonymous memory file of the given size (memfd),
// sealed against growing and shrinking so that no process can truncate it
// under a reader's mapping. Where memfd_create is unavailable it falls back
// to an unlinked temporary file.
func createFile(size int) (*os.File, error) {
	fd, err := unix.MemfdCreate(fileName, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return createTempFile(size)
	}
	f := os.NewFile(uintptr(fd), "memfd:"+fileName)
	// A memory file is made with mode 0777; the window is this user's alone.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("shm: %s: %w", f.Name(), err)
	}
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, fmt.Errorf("shm: sizing %s: %w", f.Name(), err)
	}
	// Best effort: sealing only protects readers from a truncation.
	_, _ = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL)
	return f, nil
}

// reopenReadOnly opens f again through /proc for reading only, or returns nil
// when that is not possible (then readers get f itself).
func reopenReadOnly(f *os.File) *os.File {
	ro, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return ro
}
