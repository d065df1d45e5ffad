//go:build linux

package spawn

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// SignalTagged sends sig to every process of this user but this one whose
// environment holds an entry ("KEY=VALUE") for which match is true, found
// in /proc, and returns how many it signalled. A program that tags the
// environment of the processes it starts finds them this way, and their
// children and theirs, wherever they went (another process group or
// session, another parent), unless they dropped the entry.
func SignalTagged(match func(entry string) bool, sig syscall.Signal) int {
	d, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	n := 0
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + name + "/environ") // another user's: permission denied
		if err != nil {
			continue
		}
		for entry := range bytes.SplitSeq(env, []byte{0}) {
			if match(string(entry)) {
				if syscall.Kill(pid, sig) == nil {
					n++
				}
				break
			}
		}
	}
	return n
}
