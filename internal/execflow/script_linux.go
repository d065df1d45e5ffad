//go:build linux

package execflow

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxArgCommand is the longest command that goes to the shell as its -c
// argument: Linux caps one argument at 128 KiB (MAX_ARG_STRLEN), and the
// arguments and environment together at a quarter of the stack limit.
// A longer one goes to the shell as a script (see scriptFile).
const maxArgCommand = 64 << 10

// scriptFile returns a memory file that holds run, close-on-exec, and
// the shell's arguments that read it: /bin/sh -c '. /proc/PID/fd/N', so
// that the shell opens the script itself, its $0 is still the shell's,
// and no command it starts inherits the file. The caller closes the file
// once the shell has ended; nothing is left on disk whatever happens.
func scriptFile(run string) (*os.File, []string, error) {
	fd, err := unix.MemfdCreate("poolrun-command", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, nil, fmt.Errorf("a memory file for a long command: %w", err)
	}
	f := os.NewFile(uintptr(fd), "poolrun-command")
	if _, err := f.WriteString(run); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("a memory file for a long command: %w", err)
	}
	path := "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.Itoa(fd)
	return f, []string{"/bin/sh", "-c", ". " + path}, nil
}
