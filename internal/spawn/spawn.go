// Package spawn starts child processes that die with the process that
// started them.
//
// On Linux a child asks for a parent-death signal (SysProcAttr.Pdeathsig),
// but the kernel sends it when the thread that forked the child ends, not
// the process, and the Go runtime may end threads. [Start] therefore forks
// every child from one OS thread that a goroutine holds locked for the life
// of the process, so that the signal fires only when the process ends. On
// other systems Start is cmd.Start, and children must watch their parent
// themselves.
//
// The engine starts its worker processes with it. [SignalTagged] signals the processes that a program
// tagged in their environment, and those they started in turn, wherever
// they went: this user's only, and not one that took a tagged process's
// pid.
package spawn

import "os/exec"

// Start starts cmd as cmd.Start does, from the process's spawning thread
// (see the package documentation). The caller sets cmd.SysProcAttr,
// including the parent-death signal it wants. Start is safe for concurrent
// use; starts are serialised.
func Start(cmd *exec.Cmd) error { return start(cmd) }
