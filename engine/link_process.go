package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/poolrun/poolrun/internal/spawn"
	"github.com/poolrun/poolrun/shm"
)

// The process link: a worker is a process (this binary, re-executed) that
// reads a window in shared memory, and its messages travel as frames
// (wire.go) over three pipes: jobs, replies and control. PROTOCOL.md
// describes the conversation.

// The descriptors a worker process inherits, after stdin, stdout and
// stderr.
const (
	fdWindow  = 3 // the window, read-only
	fdJobs    = 4 // frames from the parent
	fdReply   = 5 // frames to the parent
	fdControl = 6 // cancels and revokes from the parent, read all along
	fdLease   = 7 // leases from the starter (StartWorkerProcess only)
)

// processTransport starts workers as processes, each with a cache of its
// own. Their windows are in shared memory.
type processTransport struct {
	params  workerParams
	out     chan<- msg
	output  workerOutput // where what the workers print goes
	windows shmWindows
}

func newProcessTransport(capacity int, params workerParams, out chan<- msg, output workerOutput) *processTransport {
	return &processTransport{params: params, out: out, output: output, windows: shmWindows{capacity: capacity}}
}

func (t *processTransport) newWindow() (windowPublisher, error) { return t.windows.create() }

func (t *processTransport) close() {}

// start starts a worker process for place index, with its link's
// goroutines.
func (t *processTransport) start(index int, win windowPublisher) (link, error) {
	w := t.windows.of(win)
	if w == nil {
		return nil, errors.New("engine: a worker process reads a window of its transport's making")
	}
	sp, err := spawnWorker(w, t.output, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("engine: starting worker %d: %w", index, err)
	}
	l := &processLink{spawned: sp}
	l.init(l, sp.jobsW, sp.ctlW, sp.repR, t.params)
	l.begin(index)
	go l.run(t.out)
	return l, nil
}

// spawned is a worker process just started: the parent's ends of its
// pipes, and the copies of its output.
type spawned struct {
	cmd            *exec.Cmd
	jobsW, ctlW    *os.File // to the worker
	repR           *os.File // from the worker
	stdout, stderr *outputCopy
}

// spawnWorker starts a worker process that reads window w, from the
// spawning thread (see internal/spawn), with env added to its environment
// and, if lease is not nil, lease as its descriptor fdLease; what it
// prints goes to output's writers.
func spawnWorker(w *shm.Window, output workerOutput, env []string, lease *os.File) (*spawned, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program to start workers: %w", err)
	}
	// The parent's ends are non-blocking (its goroutines wait in the network
	// poller, holding no thread); exec hands the worker its ends in blocking
	// mode, which suits a process that does one thing at a time.
	lp, err := makePipes()
	if err != nil {
		return nil, err
	}
	setPipeSize(lp.jobsW)
	setPipeSize(lp.repW)

	cmd := exec.Command(exe)
	cmd.Args = append([]string{os.Args[0]}, os.Args[1:]...)
	cmd.Env = append(append(os.Environ(), fmt.Sprintf("%s=%d", WorkerEnv, protoVersion)), env...)
	cmd.Stdin = nil
	// The worker's output passes through this process, in whole lines
	// (output.go), which also keeps the last lines of its stderr: what a
	// worker that died said last goes in the error of a crash loop.
	cmd.Stdout = lp.outW
	cmd.Stderr = lp.errW
	cmd.ExtraFiles = []*os.File{w.File(), lp.jobsR, lp.repW, lp.ctlR} // fds 3, 4, 5, 6
	if lease != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, lease) // fd 7
	}
	cmd.SysProcAttr = workerSysProcAttr()
	err = spawn.Start(cmd)
	lp.closeWorkers()
	if err != nil {
		lp.closeParents()
		return nil, err
	}
	return &spawned{cmd: cmd, jobsW: lp.jobsW, ctlW: lp.ctlW, repR: lp.repR,
		stdout: startCopy(lp.outR, output.out(), false), stderr: startCopy(lp.errR, output.err(), true)}, nil
}

// terminate sends the worker SIGTERM, and SIGKILL after grace (at once
// without).
func (sp *spawned) terminate(grace time.Duration) {
	p := sp.cmd.Process
	if grace <= 0 {
		p.Kill()
		return
	}
	p.Signal(syscall.SIGTERM)
	time.AfterFunc(grace, func() { p.Kill() })
}

// wait waits for the worker's end and describes it; readErr is why the
// parent stopped reading its replies, if not their end.
func (sp *spawned) wait(readErr error) error {
	err := sp.cmd.Wait()
	// Whatever the worker's jobs started and left running in its process
	// group ends with it (see workerSysProcAttr). The group's id is the
	// worker's pid, which no new process takes while the group has
	// members, and which was the worker's until just now.
	syscall.Kill(-sp.cmd.Process.Pid, syscall.SIGKILL)
	// Nothing it printed comes after its end is reported.
	drained := time.Now().Add(outputDrain)
	sp.stdout.end(drained)
	sp.stderr.end(drained)
	if err == nil {
		if readErr != nil && readErr != io.EOF {
			return fmt.Errorf("exited with status 0 after %v", readErr)
		}
		return errors.New("exited with status 0")
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Errorf("killed by signal %v", ws.Signal())
		}
		return exitStatus(ee.ExitCode())
	}
	return err
}

// exitStatus is the end of a worker process that exited with that status
// (other than 0).
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exited with status %d", int(e)) }

// processLink is the scheduler's link to a worker process.
type processLink struct {
	frameLink
	*spawned
}

func (l *processLink) pid() int { return l.cmd.Process.Pid }

// run reports what the worker says until its replies end, then its end.
func (l *processLink) run(out chan<- msg) {
	err := l.read(out, hello{})
	if err != io.EOF {
		// The worker said something this parent cannot follow: it is
		// lost whatever it does next.
		l.cmd.Process.Kill()
	}
	l.close()
	l.r.Close()
	why := l.wait(err)
	out <- msg{from: l, died: why, lastWords: l.stderr.last()}
}

// linkPipes are the pipes of a worker process: jobs and control (parent to
// worker), replies (worker to parent), its stdout and stderr. The parent
// keeps the ends it reads or writes; the worker's ends are closed in the
// parent once the worker has them.
type linkPipes struct {
	jobsR, jobsW, repR, repW, ctlR, ctlW, outR, outW, errR, errW *os.File
}

func makePipes() (*linkPipes, error) {
	var lp linkPipes
	pairs := [][2]**os.File{{&lp.jobsR, &lp.jobsW}, {&lp.repR, &lp.repW}, {&lp.ctlR, &lp.ctlW}, {&lp.outR, &lp.outW}, {&lp.errR, &lp.errW}}
	for _, pr := range pairs {
		r, w, err := os.Pipe()
		if err != nil {
			lp.closeParents()
			lp.closeWorkers()
			return nil, fmt.Errorf("engine: pipe: %w", err)
		}
		*pr[0], *pr[1] = r, w
	}
	return &lp, nil
}

// closeWorkers closes the worker's ends.
func (lp *linkPipes) closeWorkers() { closeAll(lp.jobsR, lp.repW, lp.ctlR, lp.outW, lp.errW) }

// closeParents closes the parent's ends.
func (lp *linkPipes) closeParents() { closeAll(lp.jobsW, lp.repR, lp.ctlW, lp.outR, lp.errR) }

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}
