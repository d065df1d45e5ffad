//go:build linux

package shm

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Find returns the windows that process pid holds, as /proc shows them:
// first each of its descriptors of a window's file, in descriptor order,
// then one entry for each window it has mapped but holds no descriptor of
// (a reader that closed its descriptor after [Open], as poolrun's workers
// do). A window may appear more than once (two descriptors of one file);
// [Held.Dev] and [Held.Ino] tell which entries are the same window.
//
// Find recognizes a window by the name [Create] gives its file, not by its
// content: [Open] checks that. A process that holds no window gives no
// entries and no error; one that does not exist, or whose descriptors the
// caller may not read, gives an error naming it.
func Find(pid int) ([]Held, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("shm: finding the windows of process %d: %w", pid, err)
	}
	var held []Held
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		path := dir + "/" + e.Name()
		// A descriptor closed since ReadDir fails here and is skipped.
		target, err := os.Readlink(path)
		if err != nil || !isWindowFile(target) {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil {
			continue
		}
		held = append(held, Held{Path: path, FD: fd, Dev: uint64(st.Dev), Ino: uint64(st.Ino)})
	}
	slices.SortFunc(held, func(a, b Held) int { return a.FD - b.FD })

	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, fmt.Errorf("shm: finding the windows of process %d: %w", pid, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		h, ok := parseMapsLine(sc.Text())
		if !ok {
			continue
		}
		if slices.ContainsFunc(held, func(o Held) bool { return o.Dev == h.Dev && o.Ino == h.Ino }) {
			continue
		}
		h.Path = fmt.Sprintf("/proc/%d/map_files/%s", pid, h.Path)
		held = append(held, h)
	}
	return held, nil
}

// parseMapsLine returns the mapping that a line of /proc/PID/maps describes
// if it is a window's, with Path set to its address range as map_files
// names it ("7f0a1000-7f0a4000"). A line reads
//
//	7f4e08634000-7f4e08637000 r--s 00000000 00:01 34      /memfd:poolrun-window (deleted)
//
// address range, permissions, offset, device (major:minor, hexadecimal),
// inode, and the path, which may hold spaces.
func parseMapsLine(line string) (Held, bool) {
	var fields [5]string
	rest := line
	for i := range fields {
		var ok bool
		fields[i], rest, ok = strings.Cut(strings.TrimLeft(rest, " "), " ")
		if !ok {
			return Held{}, false
		}
	}
	if !isWindowFile(strings.TrimLeft(rest, " ")) {
		return Held{}, false
	}
	start, end, ok1 := strings.Cut(fields[0], "-")
	major, minor, ok2 := strings.Cut(fields[3], ":")
	lo, err1 := strconv.ParseUint(start, 16, 64)
	hi, err2 := strconv.ParseUint(end, 16, 64)
	maj, err3 := strconv.ParseUint(major, 16, 32)
	mnr, err4 := strconv.ParseUint(minor, 16, 32)
	ino, err5 := strconv.ParseUint(fields[4], 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil {
		return Held{}, false
	}
	return Held{
		Path: fmt.Sprintf("%x-%x", lo, hi),
		FD:   -1,
		Dev:  unix.Mkdev(uint32(maj), uint32(mnr)),
		Ino:  ino,
	}, true
}
