//go:build linux

package spawn

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// SignalTagged sends sig to every process but this one that runs as this
// process's user and whose environment holds an entry ("KEY=VALUE") for
// which match is true, and returns how many it signalled. A program that
// tags the environment of the processes it starts finds them this way, and
// their children and theirs, wherever they went (another process group or
// session, another parent), unless they dropped the entry.
//
// The processes are found in /proc: the environment is the one a process
// was started with (/proc/PID/environ), its user its real user id
// (/proc/PID/status), which must be os.Getuid(); a process of another
// user, or one that changed its real user id, is never signalled, by root
// either. A process is signalled through a pidfd opened after its
// environment was read, and only if its start time ([StartTime]) and real
// user id, read again once the pidfd is open, are those it had before: a
// process that ended meanwhile is not signalled, nor one that took its
// pid. Where pidfds cannot be opened (kernels before Linux 5.3, a
// descriptor limit reached), the same check is made and the pid signalled
// with kill(2): a process that takes the pid between the check and the
// kill is signalled in its place.
func SignalTagged(match func(entry string) bool, sig syscall.Signal) int {
	d, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	self, uid := os.Getpid(), os.Getuid()
	var buf []byte // each environment in turn
	n := 0
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == self {
			continue
		}
		// The environment first, one file: most processes bear no tag. It
		// counts once read again after the process was identified, since
		// a process that took the pid in between is another.
		if buf = environ(name, buf); !tagged(buf, match) {
			continue
		}
		was, err := identify(pid)
		if err != nil || was.uid != uid {
			continue
		}
		if buf = environ(name, buf); !tagged(buf, match) {
			continue
		}
		if signal(pid, was, sig) {
			n++
		}
	}
	return n
}

// StartTime returns when process pid started, in clock ticks after the
// system's boot (field 22 of /proc/PID/stat). With the pid, it names the
// process: one that takes the pid once this one has ended has a later
// start time, unless the pids came round to it within the same tick.
func StartTime(pid int) (uint64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The fields after the command name, in parentheses (which may hold
	// anything, spaces and parentheses included), begin with the third,
	// the state: the start time is the twentieth of them.
	if i := bytes.LastIndexByte(data, ')'); i >= 0 {
		if f := strings.Fields(string(data[i+1:])); len(f) >= 20 {
			if start, err := strconv.ParseUint(f[19], 10, 64); err == nil {
				return start, nil
			}
		}
	}
	return 0, fmt.Errorf("spawn: /proc/%d/stat: no start time in %q", pid, data)
}

// identity is what tells a process from another that had or will have its
// pid, and whose it is.
type identity struct {
	start uint64
	uid   int
}

// identify returns the identity of process pid.
func identify(pid int) (identity, error) {
	uid, err := realUID(pid)
	if err != nil {
		return identity{}, err
	}
	start, err := StartTime(pid)
	return identity{start, uid}, err
}

// realUID returns the real user id of process pid, the first of the
// "Uid:" line of /proc/PID/status.
func realUID(pid int) (int, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if ids, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(ids); len(f) > 0 {
				return strconv.Atoi(f[0])
			}
		}
	}
	return 0, fmt.Errorf("spawn: /proc/%d/status: no Uid line", pid)
}

// environ returns the environment of process pid (its name in /proc) as
// /proc gives it, read into buf's array, which it grows if need be;
// empty if it cannot be read.
func environ(pid string, buf []byte) []byte {
	fd, err := syscall.Open("/proc/"+pid+"/environ", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return buf[:0]
	}
	defer syscall.Close(fd)
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(4096, cap(buf)))
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return buf[:0]
		}
		if n == 0 {
			return buf
		}
		buf = buf[:len(buf)+n]
	}
}

// tagged reports whether env, a process's environment as /proc gives it,
// holds an entry for which match is true.
func tagged(env []byte, match func(entry string) bool) bool {
	for entry := range bytes.SplitSeq(env, []byte{0}) {
		if match(string(entry)) {
			return true
		}
	}
	return false
}

// signal sends sig to process pid if it is still the process that was
// identified as was (see [SignalTagged]), and reports whether it did.
func signal(pid int, was identity, sig syscall.Signal) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case err == nil:
		defer unix.Close(fd)
	case errors.Is(err, unix.ESRCH):
		return false // ended
	default:
		fd = -1 // no pidfd: kill(2), after the same check
	}
	// A pidfd names the process that held the pid when it was opened: the
	// one identified before if the pid is still that one's now.
	if now, err := identify(pid); err != nil || now != was {
		return false
	}
	if fd < 0 {
		return syscall.Kill(pid, sig) == nil
	}
	return unix.PidfdSendSignal(fd, sig, nil, 0) == nil
}
