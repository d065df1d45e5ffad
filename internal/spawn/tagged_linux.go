//go:build linux

package spawn

import (
	"bytes"
	"cmp"
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
	n := 0
	for _, p := range findTagged(match) {
		if signal(p.pid, p.was, sig) {
			n++
		}
	}
	return n
}

// KillTagged kills (SIGKILL) the processes that SignalTagged(match,
// SIGKILL) would, each before its parent if that is one of them, and
// returns how many it killed. The order matters for stopped processes:
// when a process group loses its last member whose parent is in another
// group of the session, the kernel continues its stopped members (SIGHUP,
// then SIGCONT), and one that ignores SIGHUP would run until its own
// SIGKILL. Children killed first, every stopped member of such a group
// has had its SIGKILL before the group is left so, and never runs again.
func KillTagged(match func(entry string) bool) int {
	found := findTagged(match)
	parent := make(map[int]int, len(found))
	for _, p := range found {
		parent[p.pid] = p.ppid
	}
	depth := func(pid int) int {
		d := 0
		for range found { // bounded, should pids read apart make a loop
			pp, ok := parent[pid]
			if !ok {
				break
			}
			d, pid = d+1, pp
		}
		return d
	}
	for i := range found {
		found[i].depth = depth(found[i].pid)
	}
	slices.SortStableFunc(found, func(a, b tagged) int { return cmp.Compare(b.depth, a.depth) })
	n := 0
	for _, p := range found {
		if signal(p.pid, p.was, syscall.SIGKILL) {
			n++
		}
	}
	return n
}

// A tagged is a process found by findTagged.
type tagged struct {
	pid, ppid, depth int
	was              identity
}

// findTagged returns the processes but this one that run as this
// process's user and whose environment holds an entry for which match is
// true (see [SignalTagged]).
func findTagged(match func(entry string) bool) []tagged {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	self, uid := os.Getpid(), os.Getuid()
	var buf []byte // each environment in turn
	var found []tagged
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == self {
			continue
		}
		// The environment first, one file: most processes bear no tag. It
		// counts once read again after the process was identified, since
		// a process that took the pid in between is another.
		if buf = environ(name, buf); !hasEntry(buf, match) {
			continue
		}
		was, err := identify(pid)
		if err != nil || was.uid != uid {
			continue
		}
		if buf = environ(name, buf); !hasEntry(buf, match) {
			continue
		}
		found = append(found, tagged{pid: pid, ppid: parentOf(pid), was: was})
	}
	return found
}

// StartTime returns when process pid started, in clock ticks after the
// system's boot (field 22 of /proc/PID/stat). With the pid, it names the
// process: one that takes the pid once this one has ended has a later
// start time, unless the pids came round to it within the same tick.
func StartTime(pid int) (uint64, error) {
	f, err := statFields(pid)
	if err == nil && len(f) >= 20 {
		if start, err := strconv.ParseUint(f[19], 10, 64); err == nil {
			return start, nil
		}
	}
	if err == nil {
		err = fmt.Errorf("spawn: /proc/%d/stat: no start time", pid)
	}
	return 0, err
}

// parentOf returns the parent of process pid (field 4 of /proc/PID/stat),
// or 0.
func parentOf(pid int) int {
	f, err := statFields(pid)
	if err != nil || len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// statFields returns the fields of /proc/PID/stat after the command name,
// in parentheses (which may hold anything, spaces and parentheses
// included): the third field, the state, is the first of them.
func statFields(pid int) ([]string, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil, fmt.Errorf("spawn: /proc/%d/stat: no command name in %q", pid, data)
	}
	return strings.Fields(string(data[i+1:])), nil
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

// hasEntry reports whether env, a process's environment as /proc gives
// it, holds an entry for which match is true.
func hasEntry(env []byte, match func(entry string) bool) bool {
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
