package execflow

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/poolrun/poolrun/internal/spawn"
	"github.com/poolrun/poolrun/internal/workflow"
)

// JanitorEnv is the environment variable that makes a process started by
// [StartJanitor] the janitor of a pool's process: its value is
// "<tag of the pool's process>:<scratch root>", the tag as in [OwnerEnv].
const JanitorEnv = "POOLRUN_JANITOR"

// dismissal is what [Janitor.Close] writes before it closes the pipe: the
// pool's process ended its work itself, and the janitor has nothing to do.
const dismissal = "done\n"

// restartPause is the least time between the starts of two janitors of
// one pool's process: a janitor that dies at once is not replaced in a
// busy loop.
const restartPause = time.Second

// Init must be called early in main (and in TestMain) of a program that
// calls [StartJanitor], right after engine.Init: in a janitor process (the
// same binary, which the janitor's waiting shell executes with
// [JanitorEnv] set once the pool's process has died) it does the
// janitor's work and exits the process; in any other process it returns
// at once.
func Init() {
	v, ok := os.LookupEnv(JanitorEnv)
	if !ok {
		return
	}
	os.Exit(serveJanitor(v, os.Stdin, os.Stderr))
}

// A Janitor is a small process that ends a pool's work should the pool's
// process die without ending it: killed with SIGKILL, say, when the
// commands run in the pool's own process (engine.InProcess, serial mode),
// where no worker process is left to notice its parent's death and stop
// its commands. See [StartJanitor].
type Janitor struct {
	env  []string // the janitor's environment
	prog *os.File // this program, open: the janitor's descriptor 3

	mu      sync.Mutex // guards what follows
	cmd     *exec.Cmd  // the janitor now
	pipe    *os.File   // the write end of its standard input
	started time.Time  // when it started
	closed  bool       // Close was called
	err     error      // the error of the first Close
}

// StartJanitor starts the janitor of this process's work on a pool with
// opts (their scratch root), in a process group of its own, with no
// parent-death signal and without this process's [OwnerEnv] mark, so that
// it outlives this process, and an outer run that ends this one spares it;
// its standard input is the read end of a pipe whose write end this
// process alone holds (close-on-exec: no command inherits it), its
// standard output /dev/null and its standard error this process's. It
// waits for the end of its input, as /bin/sh, which costs a fraction of a
// Go program's start (see [janitorWaiter]). After [Janitor.Close] it exits
// and does nothing; at the end of its input without Close (this process
// died), it becomes this program (see [Init]), which kills with SIGKILL
// every process of this user's marked as a command of this process's
// pool, or one a command started, an inner run's included (its [OwnerEnv]
// mark has an owner with this process's tag; found in /proc, on Linux: see
// spawn.SignalTagged), a few rounds until none is left, then removes this
// process's scratch folders from the scratch root and from os.TempDir()
// ([MakeTempDir]) with the proofs [SweepScratch] asks for, once this
// process is gone (waiting for that a couple of seconds at most), and,
// with opts.Plan, the lock file of its workflow ([LockWorkflow]) if this
// process held it and no other run has taken it since, and opts.JoinFile
// unless a live process holds a flock(2) of it, and exits 0. A
// command's outputs are not its business: the next run decides from its
// files and the state file.
//
// A janitor that ends before Close (killed, say) is replaced at once by
// another, started as the first was, and this process says so on its
// standard error; janitors that die at once are replaced at most every
// restartPause. Until the new one has started, this process's death
// leaves what its commands started running.
func StartJanitor(opts Options) (*Janitor, error) {
	root := opts.Scratch
	if root == "" {
		root = DefaultScratch()
	}
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("execflow: finding this program to start the janitor: %w", err)
	}
	// The program itself is handed to the waiter open: it may be gone from
	// its path by the time it is needed (go run removes its build when
	// the pool's process dies), or when a janitor is started again.
	prog, err := os.Open(exe)
	if err != nil {
		return nil, fmt.Errorf("execflow: starting the janitor: %w", err)
	}
	j := &Janitor{prog: prog}
	j.env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, OwnerEnv+"=") })
	j.env = append(j.env, JanitorEnv+"="+selfTag()+":"+root)
	if opts.Plan != nil {
		if lock, err := filepath.Abs(workflow.LockFile(opts.Plan.wf.File)); err == nil {
			j.env = append(j.env, janitorLockEnv+"="+lock)
		}
	}
	if join, err := filepath.Abs(opts.JoinFile); opts.JoinFile != "" && err == nil {
		j.env = append(j.env, janitorJoinEnv+"="+join)
	}
	if err := j.start(); err != nil {
		prog.Close()
		return nil, err
	}
	go j.watch()
	return j, nil
}

// start starts a janitor; j.mu is held, or j not yet shared.
func (j *Janitor) start() error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("execflow: starting the janitor: %w", err)
	}
	defer r.Close()
	cmd := exec.Command("/bin/sh", "-c", janitorWaiter, j.prog.Name())
	cmd.Env = j.env
	cmd.Stdin = r
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = []*os.File{j.prog} // descriptor 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("execflow: starting the janitor: %w", err)
	}
	j.cmd, j.pipe, j.started = cmd, w, time.Now()
	return nil
}

// watch waits for the end of each janitor of j, and starts another in
// its place unless j was closed.
func (j *Janitor) watch() {
	j.mu.Lock()
	defer j.mu.Unlock()
	for {
		cmd, started := j.cmd, j.started
		j.mu.Unlock()
		err := cmd.Wait()
		j.mu.Lock()
		if pause := restartPause - time.Since(started); pause > 0 && !j.closed {
			j.mu.Unlock()
			time.Sleep(pause)
			j.mu.Lock()
		}
		if j.closed {
			return
		}
		j.pipe.Close()
		if serr := j.start(); serr != nil {
			j.closed = true // nothing to dismiss
			j.prog.Close()
			fmt.Fprintf(os.Stderr, "poolrun: the janitor (pid %d) ended (%v), and no other could start: should poolrun be killed, what its commands started runs on: %v\n", cmd.Process.Pid, err, serr)
			return
		}
		fmt.Fprintf(os.Stderr, "poolrun: the janitor (pid %d) ended (%v); started another (pid %d)\n", cmd.Process.Pid, err, j.cmd.Process.Pid)
	}
}

// janitorWaiter is the script of the janitor's wait, which names itself
// for ps: /bin/sh reads its standard input and exits if it says
// [dismissal]; at its end without that (the pool's process died), it
// executes this program, open on descriptor 3 (the path, $0, where /proc
// is missing), which finds its standard input at its end and ends what
// the pool left. The shell waits: a janitor of this program's own would
// cost a whole Go program's start for the wait alone, at the moment the
// first commands start (bench/README.md has the figures).
var janitorWaiter = `: poolrun janitor; read -r said; [ "$said" = ` + strings.TrimSuffix(dismissal, "\n") + ` ] || { [ -e /proc/self/fd/3 ] && exec /proc/self/fd/3; exec "$0"; }`

// Close ends what this process's commands left running outside their
// process groups and that is still to be ended (see "Stopping" in the
// package documentation), and dismisses the janitor: call it once the
// pool's Run has returned, when this process has ended its work itself.
// The janitor exits at once, doing nothing, and is reaped in the
// background. Closing again does nothing; the error is that of the first
// Close.
func (j *Janitor) Close() error {
	leftovers.flush()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return j.err
	}
	j.closed = true
	_, err := io.WriteString(j.pipe, dismissal)
	if cerr := j.pipe.Close(); err == nil {
		err = cerr
	}
	j.prog.Close()
	if err != nil {
		j.err = fmt.Errorf("execflow: dismissing the janitor: %w", err)
	}
	return j.err
}

// Pid returns the process id of the janitor now.
func (j *Janitor) Pid() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.cmd.Process.Pid
}

// serveJanitor is the whole life of a janitor whose JanitorEnv is v and
// whose standard input is in; it returns the exit status.
func serveJanitor(v string, in *os.File, stderr io.Writer) int {
	tag, root, ok := strings.Cut(v, ":")
	pid, tagOK := tagPID(tag)
	if !ok || !tagOK || !filepath.IsAbs(root) {
		fmt.Fprintf(stderr, "poolrun janitor: %s=%q: want <pool pid>.<its start time>:<absolute scratch root>\n", JanitorEnv, v)
		return 2
	}
	if fi, err := in.Stat(); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		fmt.Fprintf(stderr, "poolrun janitor: started by poolrun run, whose death it waits for on its standard input (a pipe); not to be started by hand\n")
		return 2
	}
	said, _ := io.ReadAll(in)
	if string(said) == dismissal {
		return 0
	}
	// The pool's process died: what its commands left running ends, then
	// its scratch folders go.
	killMarked(spawn.OwnedByPool(tag))
	status := 0
	roots := []string{root}
	if tmp := os.TempDir(); !sameDir(tmp, root) {
		roots = append(roots, tmp)
	}
	for _, r := range roots {
		if err := removeScratchOf(r, pid); err != nil {
			fmt.Fprintf(stderr, "poolrun janitor: removing the scratch folders of poolrun (pid %d): %v\n", pid, err)
			status = 1
		}
	}
	if lock := os.Getenv(janitorLockEnv); lock != "" {
		if err := removeDeadLock(lock, pid); err != nil {
			fmt.Fprintf(stderr, "poolrun janitor: removing the lock file of poolrun (pid %d): %v\n", pid, err)
			status = 1
		}
	}
	if join := os.Getenv(janitorJoinEnv); join != "" {
		if err := removeUnheld(join); err != nil {
			fmt.Fprintf(stderr, "poolrun janitor: removing the join file of poolrun (pid %d): %v\n", pid, err)
			status = 1
		}
	}
	return status
}

// janitorLockEnv holds, in the janitor's environment, the path of the
// lock file of the workflow its pool's process runs.
const janitorLockEnv = "POOLRUN_JANITOR_LOCK"

// janitorJoinEnv holds, in the janitor's environment, the path of the
// join file of its pool's server ([Options.JoinFile]).
const janitorJoinEnv = "POOLRUN_JANITOR_JOIN"
