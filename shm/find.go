package shm

import (
	"path/filepath"
	"strings"
)

// fileName is the name [Create] gives a window's file: the name of the
// anonymous memory file ("memfd:poolrun-window" in /proc), or the prefix of
// the temporary file's name, which ends in 16 random hexadecimal digits.
const fileName = "poolrun-window"

// A Held is one window that a process holds, through a descriptor or a
// mapping, as [Find] reports it.
type Held struct {
	// Path is where [Open] can reach the window's file: /proc/PID/fd/N for a
	// descriptor, /proc/PID/map_files/START-END for a mapping. Opening a
	// descriptor's path takes the right to read the process's descriptors
	// (the same user, or root); opening a mapping's path takes
	// CAP_SYS_ADMIN (or CAP_CHECKPOINT_RESTORE) as well.
	Path string

	// FD is the descriptor's number, or -1 for a mapping of a window that
	// the process holds no descriptor of.
	FD int

	// Dev and Ino identify the window's file (its device and inode numbers):
	// entries with the same pair, in one process or in several, are the
	// same window.
	Dev, Ino uint64
}

// isWindowFile reports whether target, the target of a /proc/PID/fd link
// or the path of a mapping in /proc/PID/maps, names a file made by
// [Create]: "/memfd:poolrun-window (deleted)" or
// "/tmp/poolrun-window-0123456789abcdef (deleted)".
func isWindowFile(target string) bool {
	base := filepath.Base(strings.TrimSuffix(target, " (deleted)"))
	if base == "memfd:"+fileName {
		return true
	}
	random, ok := strings.CutPrefix(base, fileName+"-")
	if !ok || len(random) != 16 {
		return false
	}
	return strings.Trim(random, "0123456789abcdef") == ""
}
