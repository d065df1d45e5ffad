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

Prints the window of the running pool that process PID belongs to, as its
parent or as one of its workers: its generation, how many required items it
lists, whether it overflowed, and the keys, with the names of the items this
binary knows. The parent holds the window as an open descriptor
(/proc/PID/fd); a worker only maps it (/proc/PID/maps), so a worker's window
is read through the descriptor of the worker's parent. You need the right to
read the processes' descriptors (the same user, or root).
`

const inspectDetails = `Example:
  poolrun scaffold & sleep 2; poolrun inspect $!
`

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("inspect", inspectUsage, inspectDetails)
	if err := parseFlags(fs, args, stdout); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() != 1 {
		return usageError(fs, fmt.Sprintf("want one process id, got %d arguments", fs.NArg()))
	}
	pid, err := strconv.Atoi(fs.Arg(0))
	if err != nil || pid <= 0 {
		return badInputf("poolrun inspect: %q is not a process id", fs.Arg(0))
	}
	windows, err := findWindows(pid)
	if err != nil {
		return badInput(fmt.Errorf("poolrun inspect: %w", err))
	}
	for _, win := range windows {
		if err := printWindow(stdout, win); err != nil {
			return fmt.Errorf("poolrun inspect: %w", err)
		}
	}
	return nil
}

// A windowSource says where to read one window that a process holds.
type windowSource struct {
	pid   int    // the process inspected
	path  string // what to open: a descriptor's path, or a mapping's
	via   int    // the process whose descriptor path is; 0 for pid's mapping
	names int    // the process that lists the items' names (see readNames)
}

// findWindows returns where to read each window that process pid holds,
// once per window. A window that pid's parent holds too (pid is a pool's
// worker) is read through the parent's descriptor, with the parent's
// names; one that pid only maps, and its parent does not hold, through
// the mapping itself, which only root may open.
func findWindows(pid int) ([]windowSource, error) {
	held, err := shm.Find(pid)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("no process %d", pid)
	case errors.Is(err, os.ErrPermission):
		return nil, fmt.Errorf("may not read the descriptors of process %d (another user's? run inspect as that user or as root): %w", pid, err)
	case err != nil:
		return nil, err
	}
	var (
		sources []windowSource
		seen    = map[[2]uint64]bool{}
	)
	for _, h := range held {
		id := [2]uint64{h.Dev, h.Ino}
		if seen[id] {
			continue // another descriptor of a window already listed
		}
		seen[id] = true
		src := windowSource{pid: pid, path: h.Path, via: pid, names: pid}
		if parent := parentOf(pid); parent > 0 {
			if p, ok := heldBy(parent, id); ok {
				// A worker's window, which its parent, the pool, holds
				// too: read through the pool's descriptor, with its names.
				src.path, src.via, src.names = p.Path, parent, parent
			} else if h.FD < 0 {
				src.via, src.names = 0, parent
			}
		}
		sources = append(sources, src)
	}
	if len(sources) == 0 {
		return nil, fmt.Errorf("process %d holds no poolrun window (is it a running pool's parent or one of its workers?)", pid)
	}
	return sources, nil
}

// heldBy returns process pid's descriptor of the window id (device, inode).
func heldBy(pid int, id [2]uint64) (shm.Held, bool) {
	if pid <= 0 {
		return shm.Held{}, false
	}
	held, _ := shm.Find(pid)
	for _, h := range held {
		if h.FD >= 0 && h.Dev == id[0] && h.Ino == id[1] {
			return h, true
		}
	}
	return shm.Held{}, false
}

// printWindow prints the window that src locates.
func printWindow(stdout io.Writer, src windowSource) error {
	f, err := os.Open(src.path)
	if err != nil {
		if src.via == 0 {
			return fmt.Errorf("process %d maps a window but holds no descriptor of it, nor does its parent; reading the mapping takes CAP_SYS_ADMIN: %w", src.pid, err)
		}
		return err
	}
	defer f.Close()
	w, err := shm.Open(f)
	switch {
	case errors.Is(err, shm.ErrVersion):
		return fmt.Errorf("process %d holds a window of another build of poolrun, which this one cannot read (inspect it with the poolrun that started the pool): %w", src.pid, err)
	case errors.Is(err, shm.ErrCorrupt):
		return fmt.Errorf("process %d holds a file named like a window that is not a valid one: %w", src.pid, err)
	case err != nil:
		return err
	}
	defer w.Close()
	s, err := w.Snapshot(nil)
	if err != nil {
		return err
	}
	names := readNames(src.names)
	fmt.Fprintf(stdout, "window of process %d", src.pid)
	if src.via != src.pid && src.via != 0 {
		fmt.Fprintf(stdout, " (read through its parent %d)", src.via)
	}
	fmt.Fprintf(stdout, ": generation %d, %d of %d slots used", s.Gen, len(s.Keys), w.Capacity())
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

// parentOf returns the parent of process pid, from /proc/PID/stat, or 0.
func parentOf(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// "PID (COMMAND) STATE PPID ...": the command may hold spaces and
	// parentheses, so the fields are counted from the last ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// readNames reads the "key name" lines a running poolrun lists its items
// in (see openNames); nil if there are none.
func readNames(pid int) map[uint64]string {
	if pid <= 0 {
		return nil
	}
	f := openNamesOf(pid)
	if f == nil {
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

// openNamesOf opens the names file that process pid holds (its descriptor
// whose target is "/memfd:poolrun-names (deleted)"), or returns nil.
func openNamesOf(pid int) *os.File {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if target, err := os.Readlink(path); err == nil && strings.Contains(target, "memfd:"+namesFile) {
			if f, err := os.Open(path); err == nil {
				return f
			}
		}
	}
	return nil
}
