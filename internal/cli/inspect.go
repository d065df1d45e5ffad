package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/shm"
)

const inspectUsage = `Usage: poolrun inspect PID

Prints the window of the running pool whose parent (or worker) process is
PID: its generation, how many required items it lists, whether it
overflowed, and the keys, with the names of the items this binary knows.
The window is found among the process's open descriptors
(/proc/PID/fd), so you need the right to read them (the same user, or root).

Example:
  poolrun scaffold & sleep 2; poolrun inspect $!
`

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("inspect", inspectUsage, stderr)
	if err := parseFlags(fs, args, stdout); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return badInputf("poolrun inspect: want one process id, got %d arguments", fs.NArg())
	}
	pid, err := strconv.Atoi(fs.Arg(0))
	if err != nil || pid <= 0 {
		return badInputf("poolrun inspect: %q is not a process id", fs.Arg(0))
	}
	f, err := findFD(pid, "poolrun-window")
	if err != nil {
		return badInput(fmt.Errorf("poolrun inspect: %w", err))
	}
	defer f.Close()
	names := readNames(pid)
	w, err := shm.Open(f)
	if err != nil {
		return fmt.Errorf("poolrun inspect: %w", err)
	}
	defer w.Close()
	s, err := w.Snapshot(nil)
	if err != nil {
		return fmt.Errorf("poolrun inspect: %w", err)
	}
	fmt.Fprintf(stdout, "window of process %d: generation %d, %d of %d slots used", pid, s.Gen, len(s.Keys), w.Capacity())
	if s.Overflow {
		fmt.Fprint(stdout, ", OVERFLOWED (more required items than slots: workers keep everything)")
	}
	fmt.Fprintln(stdout)
	for _, k := range s.Keys {
		name, ok := names[k]
		if !ok {
			name = "(an item this binary does not know by name)"
			if h, ok := cachepool.Lookup(k); ok {
				name = h.Name()
			}
		}
		fmt.Fprintf(stdout, "  %016x  %s\n", k, name)
	}
	return nil
}

// findFD opens the descriptor of process pid whose target names what,
// such as "memfd:poolrun-window (deleted)".
func findFD(pid int, what string) (*os.File, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil || !strings.Contains(target, what) {
			continue
		}
		return os.Open(filepath.Join(dir, e.Name()))
	}
	return nil, fmt.Errorf("process %d has no %s open (is it a running pool's parent?)", pid, what)
}

// readNames reads the "key name" lines a running poolrun lists its items
// in (see openNames); nil if there are none.
func readNames(pid int) map[uint64]string {
	f, err := findFD(pid, namesFile)
	if err != nil {
		return nil
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil
	}
	names := map[uint64]string{}
	for _, l := range strings.Split(string(data), "\n") {
		k, name, ok := strings.Cut(l, " ")
		if key, err := strconv.ParseUint(k, 16, 64); ok && err == nil {
			names[key] = name
		}
	}
	return names
}
