//go:build linux

package cli

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/poolrun/poolrun/cachepool"
)

// namesFile is the name of the anonymous memory file in which a running
// poolrun lists "key name" for the items of its pool, so that "poolrun
// inspect" can name keys that only exist at run time (items of families).
const namesFile = "poolrun-names"

// openNames writes the names of items into a new anonymous memory file and
// returns it; the caller keeps it open while the pool runs. Errors only
// cost inspect its names, so it returns nil on any.
func openNames(items []cachepool.Handle) *os.File {
	fd, err := unix.MemfdCreate(namesFile, unix.MFD_CLOEXEC)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), namesFile)
	var b strings.Builder
	for _, it := range items {
		fmt.Fprintf(&b, "%016x %s\n", it.Key(), it.Name())
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return nil
	}
	return f
}
