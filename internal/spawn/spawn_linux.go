//go:build linux

package spawn

import (
	"os/exec"
	"runtime"
	"sync"
)

// The spawning thread: a goroutine locked to its OS thread, never unlocked,
// that lives as long as the process and starts every child.
var spawner struct {
	once sync.Once
	reqs chan req
}

type req struct {
	cmd  *exec.Cmd
	done chan error
}

func start(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan req)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread stays ours
			for r := range spawner.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawner.reqs <- req{cmd, done}
	return <-done
}
