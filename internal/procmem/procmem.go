// Package procmem reads this process's peak resident memory.
package procmem

import (
	"bytes"
	"os"
	"strconv"
)

// PeakRSS returns this process's peak resident memory in bytes: VmHWM of
// /proc/self/status, the high-water mark of the process's own memory
// since it started; 0 where that cannot be read (elsewhere than Linux).
//
// Not getrusage's ru_maxrss, which is also at least the high-water mark
// of the process that exec'd this one (an exec carries the old image's
// into it): a worker started by a large pool would report the pool's
// size as its own.
func PeakRSS() int64 { return peak("/proc/self/status") }

// PeakRSSOf returns the peak resident memory in bytes of process pid, a
// child of this one, as [PeakRSS] does for this process; 0 where it
// cannot be read.
func PeakRSSOf(pid int) int64 { return peak("/proc/" + strconv.Itoa(pid) + "/status") }

func peak(status string) int64 {
	data, err := os.ReadFile(status)
	if err != nil {
		return 0
	}
	_, rest, ok := bytes.Cut(data, []byte("\nVmHWM:"))
	if !ok {
		return 0
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(line), []byte("kB")))), 10, 64)
	if err != nil {
		return 0
	}
	return kb << 10
}
