package execflow

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/procmem"
)

// killGrace is how long the processes of a command's group have, after
// SIGTERM, before they are killed with SIGKILL.
const killGrace = 300 * time.Millisecond

// drainGrace bounds the wait for the end of a command's output once its
// group is gone: a process that left the group (setsid) may hold its
// pipes (what they hold then is still passed on). killGrace plus
// drainGrace stays below the engine's half second between a worker's
// SIGTERM and its exit.
const drainGrace = 100 * time.Millisecond

// groupPoll is how often the end of a process group is checked.
const groupPoll = 5 * time.Millisecond

// shellCmd is a command for /bin/sh -c, where to run it, and where its
// output goes.
type shellCmd struct {
	run       string
	dir       string
	env       []string // the command's own: runShell numbers its OwnerEnv mark
	tailLines int
	job       string // the job's id, for tags and log files; "" for an item
	stdio     Stdio  // resolved; ignored without a job
	owner     string // the command's owner in its OwnerEnv mark (markCommand); set by runShell
}

// shellOutcome is how a command ended.
type shellOutcome struct {
	exitCode int    // -1 when killed by a signal
	signal   string // the signal's name, or ""
	tail     string // the last lines of its standard error
	duration time.Duration
	// maxRSS is the peak resident memory, in bytes, of the command's
	// largest process (wait4's ru_maxrss, over the shell and the
	// descendants it waited for); 0 where unknown. floor, set only when
	// the command failed (exitCode not 0), is this process's own peak
	// once the command ended, at least what it was when it started the
	// command, which an exec carries into the command's (see
	// Result.PeakRSS).
	maxRSS, floor int64
}

// rssMargin is how much more than floor (this process's peak) a
// command's peak must be to be its own: the kernel's counts of resident
// pages are approximate (per-CPU counters), so that a command that used
// nothing of its own may show a little more than the floor read after it.
func rssMargin(floor int64) int64 { return max(4<<20, floor/16) }

// runShell runs c with /bin/sh -c (or directly, when it is made of plain
// words: see plainWords) in a process group of its own and returns
// when the group is gone. Its standard output and error go where
// c.stdio says: to log files, or to the job's output (engine.JobOutput:
// in a worker process, the worker's), tagged or not (see [Stdio]). The
// last lines of its standard error are kept. A command that exits with a
// non-zero status is not an error here: the outcome says so. The error is
// non-nil when the command could not start, when its log files could not
// be created or written, or when ctx ended (then the whole group was
// stopped, and the error wraps the context's cause).
//
// Shutdown: when ctx ends, the group gets SIGTERM; after killGrace, if the
// shell is still there, the group gets SIGKILL. Once the shell has been
// reaped, any process left in its group gets SIGTERM (unless it had it
// already) and, if the group is not empty killGrace after that SIGTERM,
// SIGKILL. Then the processes that left the group and still bear the
// command's owner in their [OwnerEnv] mark are killed with SIGKILL: at
// once, or, when a look for them began less than sweepEvery ago, with the
// next (see leftovers.go). Then the output is read to its end, waiting at
// most drainGrace for it; after that, what its pipes hold is still passed
// on, and no more.
func runShell(ctx context.Context, c shellCmd) (shellOutcome, error) {
	var out shellOutcome
	c.owner = markCommand(c.env)
	stdout, stderr := engine.JobOutput(ctx)
	prefix := ""
	if c.job != "" && c.stdio.Tag {
		prefix = "[" + c.job + "] "
	}
	if c.job != "" && c.stdio.Echo {
		tag := "[" + c.job + "] "
		fmt.Fprint(stdout, tag+strings.ReplaceAll(strings.TrimRight(c.run, "\n"), "\n", "\n"+tag)+"\n")
	}
	logs := c.job != "" && c.stdio.LogDir != ""
	if logs {
		o, e, err := openLogs(c.stdio.LogDir, c.job)
		if err != nil {
			return out, err
		}
		defer o.Close()
		defer e.Close()
		stdout, stderr, prefix = o, e, ""
	}
	tail := newTailWriter(c.tailLines)
	g := &group{}
	start := time.Now()
	var ru syscall.Rusage
	ws, writeErr, err := runCommand(ctx, c, g, stdout, stderr, prefix, tail, &ru)
	if err != nil {
		return out, err
	}
	out.maxRSS = int64(ru.Maxrss) * maxrssUnit
	if !logs {
		writeErr = nil // the job's output is not its business
	}
	out.duration = time.Since(start)
	out.tail = tail.String()

	if g.cancelled() {
		// ctx ended while the command ran: whatever its status says, it
		// was stopped (or raced with the stop).
		return out, fmt.Errorf("stopped: %w", context.Cause(ctx))
	}
	if ws.Signaled() {
		out.exitCode, out.signal = -1, signalName(ws.Signal())
	} else {
		out.exitCode = ws.ExitStatus()
	}
	if out.exitCode != 0 {
		// This process's own peak now: at least what it was when the
		// command started (a peak never falls). Not its getrusage maxrss,
		// which also holds what its own exec carried over from its parent.
		// Read only for a command that failed, floor's one use: the
		// kernel walks the process's memory map for /proc/self/status,
		// which would otherwise weigh on every command.
		out.floor = procmem.PeakRSS()
	}
	if writeErr != nil {
		return out, fmt.Errorf("writing its output: %w", writeErr)
	}
	return out, nil
}

// runCommand starts c with syscall.ForkExec, with g for its group and its
// output copied to stdout and stderr (see newCommandStreams), and waits
// for its end as runShell says (its resource usage in ru): the goroutine that calls it waits for the
// command's exit (see exitWait), and a goroutine per pipe copies its
// output, waiting in the runtime's poller (see pipecopy). It returns how the shell ended;
// writeErr is the first error of the copies' writers; err is non-nil when
// the command could not start or could not be waited for.
//
// The command is forked from the calling goroutine's thread, and its
// parent-death signal fires when that thread ends: the Go runtime ends a
// thread only when a goroutine locked to it exits without unlocking it,
// which no goroutine that runs commands does.
func runCommand(ctx context.Context, c shellCmd, g *group, stdout, stderr io.Writer, prefix string, tail io.Writer, ru *syscall.Rusage) (ws syscall.WaitStatus, writeErr, err error) {
	streams, err := newCommandStreams(stdout, stderr, prefix, tail)
	if err != nil {
		return ws, nil, err
	}
	defer streams.close()
	stdin, err := devNull()
	if err != nil {
		return ws, nil, err
	}
	var exit exitWait
	attr := &syscall.ProcAttr{
		Dir:   c.dir,
		Env:   c.env,
		Files: []uintptr{stdin.Fd(), streams.stdout, streams.stderr},
		Sys:   exit.sysProcAttr(),
	}
	pid, script, err := forkRun(c.run, attr)
	if err != nil {
		return ws, nil, err
	}
	if script != nil {
		defer script.Close()
	}
	streams.started()
	g.set(pid)
	running.add(pid)
	defer running.remove(pid)

	exited := make(chan struct{})
	cancelled := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(cancelled)
		g.cancel(pid)
		t := time.NewTimer(killGrace)
		defer t.Stop()
		select {
		case <-exited:
		case <-t.C:
			g.kill()
		}
	})
	exit.wait(pid)
	close(exited)
	if !stop() {
		// It signals the group through the shell's pid: not once that
		// pid is reaped, and free again.
		<-cancelled
	}
	ws, err = exit.reap(pid, ru)
	if err != nil {
		err = fmt.Errorf("waiting for the command: %w", err)
	}
	g.stop()
	if c.owner != "" {
		leftovers.end(c.owner)
	}
	return ws, streams.wait(drainGrace), err
}

// forkRun starts the command run with attr: directly, when it is made of
// plain words (see plainWords) whose first the PATH of attr.Env finds,
// else with /bin/sh -c, which says why a direct start failed; a command
// too long for an argument goes to the shell in a memory file
// (scriptFile), which the caller closes once the command has ended (nil
// when there is none).
func forkRun(run string, attr *syscall.ProcAttr) (pid int, script *os.File, err error) {
	if words := plainWords(run); words != nil {
		if path := lookPath(words[0], envValue(attr.Env, "PATH")); path != "" {
			if pid, err = syscall.ForkExec(path, words, attr); err == nil {
				return pid, nil, nil
			}
		}
	}
	argv := []string{"/bin/sh", "-c", run}
	if len(run) > maxArgCommand {
		if script, argv, err = scriptFile(run); err != nil {
			return 0, nil, err
		}
	}
	if pid, err = syscall.ForkExec("/bin/sh", argv, attr); err != nil {
		if script != nil {
			script.Close()
		}
		return 0, nil, fmt.Errorf("starting sh: %w", &os.PathError{Op: "fork/exec", Path: "/bin/sh", Err: err})
	}
	return pid, script, nil
}

// reap waits for child pid's exit and reaps it; ru receives its resource
// usage.
func reap(pid int, ru *syscall.Rusage) (syscall.WaitStatus, error) {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, ru)
		if err != syscall.EINTR {
			return ws, err
		}
	}
}

func signalName(s syscall.Signal) string {
	if name := unix.SignalName(s); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", int(s))
}

// group is a command's process group: its id is the shell's pid.
type group struct {
	mu      sync.Mutex
	pgid    int
	termAt  time.Time // when SIGTERM was sent; zero if not yet
	ctxDone bool      // the command's context ended while it ran
}

func (g *group) set(pid int) {
	g.mu.Lock()
	g.pgid = pid
	g.mu.Unlock()
}

// cancel records that the command's context ended, and sends SIGTERM to
// the group.
func (g *group) cancel(pid int) error {
	g.mu.Lock()
	g.pgid = pid
	g.ctxDone = true
	g.mu.Unlock()
	return g.term()
}

// kill sends SIGKILL to the group.
func (g *group) kill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	syscall.Kill(-g.pgid, syscall.SIGKILL)
}

func (g *group) cancelled() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ctxDone
}

// term sends SIGTERM to the group, once.
func (g *group) term() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.termAt.IsZero() {
		g.termAt = time.Now()
		if err := syscall.Kill(-g.pgid, syscall.SIGTERM); err == syscall.ESRCH {
			return os.ErrProcessDone
		}
	}
	return nil
}

// groupAlive reports whether some process of group pgid is still there. A
// zombie that nobody has reaped yet counts: where the init process is slow
// to reap the orphans of a killed shell, stopping a group with orphans
// takes the whole killGrace.
func groupAlive(pgid int) bool {
	return syscall.Kill(-pgid, 0) == nil
}

// stop ends what is left of the group once its shell has been reaped (so
// that the context no longer signals it through the shell's pid): SIGTERM unless sent already, then
// SIGKILL when the group is still there killGrace after the SIGTERM.
func (g *group) stop() {
	g.mu.Lock()
	pgid := g.pgid
	g.mu.Unlock()
	if !groupAlive(pgid) {
		return
	}
	g.term()
	g.mu.Lock()
	deadline := g.termAt.Add(killGrace)
	g.mu.Unlock()
	for groupAlive(pgid) && time.Now().Before(deadline) {
		time.Sleep(groupPoll)
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
}
