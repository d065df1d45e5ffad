//go:build linux

package shm_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// sharedFutexSleepers returns how many threads of process pid are blocked in
// a futex wait that is not private (operation 0, FUTEX_WAIT), as
// /proc/PID/task/TID/syscall shows them: threads asleep in WaitGen, since the
// Go runtime's own futex waits are private. ok is false when /proc does not
// tell.
func sharedFutexSleepers(pid int) (n int, ok bool) {
	tasks, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/syscall")
	if err != nil || len(tasks) == 0 {
		return 0, false
	}
	nr := strconv.Itoa(unix.SYS_FUTEX)
	for _, path := range tasks {
		b, err := os.ReadFile(path)
		if err != nil {
			if os.IsNotExist(err) {
				continue // the thread exited
			}
			return 0, false
		}
		// "NR ARG1 ARG2 ...": the futex's address, then the operation.
		f := strings.Fields(string(b))
		if len(f) > 2 && f[0] == nr && f[2] == "0x0" {
			n++
		}
	}
	return n, true
}
