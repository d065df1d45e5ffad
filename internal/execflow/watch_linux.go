//go:build linux

package execflow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolrun/poolrun/internal/pipecopy"
)

// A watch follows a command that runs in the pool's own process, from its
// start to its end, in the goroutine that started it: the command's exit,
// through a pidfd, and its output pipes, in a private epoll instance that
// the runtime's network poller waits on. os/exec and pipecopy would use
// four goroutines or more per command (a wait that holds a thread, a copy
// per pipe, a watch of the context), and more system calls;
// in a process that runs many short commands among other goroutines, the
// hand-offs and calls cost more CPU than the commands do (bench/README.md,
// group 8). Watches are kept for the next command (watches): each keeps
// its epoll instance, and its buffer.
type watch struct {
	ep     int      // the private epoll instance
	epf    *os.File // ep, as the runtime's poller knows it
	pidfd  int      // the command's; or a pipe that ends at its exit
	pidIn  bool     // pidfd is in ep
	pipes  []*watchedPipe
	buf    []byte
	events [8]unix.EpollEvent
}

// A watchedPipe is a command's standard output or error: its write end
// goes to the command, its read end stays here (both blocking: it is read
// only when ep says it holds something, or has ended).
type watchedPipe struct {
	r, w    int // -1 once closed
	copy    *lineCopy
	drained int // bytes read since the deadline of the drain
}

// watchAvailable: the pool's own process watches its commands; a worker
// process waits as os/exec does, which costs less in a process that does
// nothing else meanwhile (bench/README.md, group 8).
func watchAvailable() bool { return inPoolProcess() }

var watches sync.Pool

// watchNoPidfd makes watches do without the commands' pidfds, as on a
// kernel older than 5.3: a test's.
var watchNoPidfd = false

// getWatch returns a watch with an empty epoll instance.
func getWatch() (*watch, error) {
	if w, ok := watches.Get().(*watch); ok {
		return w, nil
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	// The runtime's poller takes a non-blocking descriptor only.
	if err := unix.SetNonblock(ep, true); err != nil {
		unix.Close(ep)
		return nil, os.NewSyscallError("fcntl", err)
	}
	// Dropped from watches, it is closed by the os.File's finalizer.
	return &watch{ep: ep, epf: os.NewFile(uintptr(ep), "epoll"), pidfd: -1, buf: make([]byte, 32<<10)}, nil
}

// release closes what the command left open and keeps w for the next.
func (w *watch) release() {
	for _, p := range w.pipes {
		closeFd(&p.w)
		w.closeRead(p)
	}
	w.pipes = w.pipes[:0]
	if w.pidIn {
		unix.EpollCtl(w.ep, unix.EPOLL_CTL_DEL, w.pidfd, nil)
		w.pidIn = false
	}
	closeFd(&w.pidfd)
	if w.epf.SetReadDeadline(time.Time{}) != nil {
		w.epf.Close()
		return
	}
	watches.Put(w)
}

// closeRead takes p's read end out of ep and closes it. Closing alone
// would not do: a command that another goroutine is starting holds a copy
// of every descriptor until its exec, and ep would go on reporting the
// pipe, under a number that the next pipe may take.
func (w *watch) closeRead(p *watchedPipe) {
	if p.r >= 0 {
		unix.EpollCtl(w.ep, unix.EPOLL_CTL_DEL, p.r, nil)
		closeFd(&p.r)
	}
}

func closeFd(fd *int) {
	if *fd >= 0 {
		unix.Close(*fd)
		*fd = -1
	}
}

// pipe makes a pipe whose read end is copied by c and returns its write
// end, for the command.
func (w *watch) pipe(c *lineCopy) (int, error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return -1, os.NewSyscallError("pipe2", err)
	}
	w.pipes = append(w.pipes, &watchedPipe{r: fds[0], w: fds[1], copy: c})
	return fds[1], nil
}

// started closes this process's write ends, now that command pid has
// them, and watches the command's exit and the read ends. Without a
// pidfd (a kernel older than 5.3), a goroutine waits for the exit and
// then closes a pipe that the watch reads.
func (w *watch) started(pid int) error {
	for _, p := range w.pipes {
		closeFd(&p.w)
	}
	if watchNoPidfd {
		closeFd(&w.pidfd)
	}
	if w.pidfd < 0 {
		var fds [2]int
		if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
			return os.NewSyscallError("pipe2", err)
		}
		w.pidfd = fds[0]
		go func() {
			var info unix.Siginfo
			for unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
			}
			unix.Close(fds[1])
		}()
	}
	if err := w.add(w.pidfd); err != nil {
		return err
	}
	w.pidIn = true
	for _, p := range w.pipes {
		if err := w.add(p.r); err != nil {
			return err
		}
	}
	return nil
}

func (w *watch) add(fd int) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	return os.NewSyscallError("epoll_ctl", unix.EpollCtl(w.ep, unix.EPOLL_CTL_ADD, fd, &ev))
}

// wait returns once the command has exited (it is not reaped), copying
// its output meanwhile. Once g is cancelled (which wakes it: see wake),
// the group gets SIGKILL KillGrace after its SIGTERM if the shell is
// still there.
func (w *watch) wait(g *group) error {
	var killAt time.Time
	killed := false
	for {
		if !killed && killAt.IsZero() && g.cancelled() {
			killAt = g.termTime().Add(KillGrace)
		}
		if !killAt.IsZero() && !killed {
			if !time.Now().Before(killAt) {
				g.kill()
				killed = true
			} else {
				w.epf.SetReadDeadline(killAt)
			}
		}
		exited, err := w.poll(0)
		if exited || err != nil {
			return err
		}
	}
}

// wake makes a wait in poll return, to look at the group again.
func (w *watch) wake() { w.epf.SetReadDeadline(time.Unix(1, 0)) }

// poll waits for events until there are some, or a deadline (or a wake)
// has passed, and handles them (see handle). It reports whether the
// command has exited.
func (w *watch) poll(limit int) (exited bool, err error) {
	rc, err := w.epf.SyscallConn()
	if err != nil {
		return false, err
	}
	err = rc.Read(func(uintptr) bool {
		var got bool
		got, exited = w.handle(limit)
		return got
	})
	if errors.Is(err, os.ErrDeadlineExceeded) {
		w.epf.SetReadDeadline(time.Time{})
		err = nil
	}
	return exited, err
}

// handle takes the events that are there, without waiting: it copies
// what the pipes hold and notes their ends and the command's exit. With
// limit > 0, a pipe is read no further once limit bytes were read from it
// in such calls. It reports whether there were events.
func (w *watch) handle(limit int) (got, exited bool) {
	for {
		n, err := unix.EpollWait(w.ep, w.events[:], 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return got, exited
		}
		got = true
		more := false
		for _, ev := range w.events[:n] {
			if int(ev.Fd) == w.pidfd {
				unix.EpollCtl(w.ep, unix.EPOLL_CTL_DEL, w.pidfd, nil)
				w.pidIn = false
				exited = true
				continue
			}
			for _, p := range w.pipes {
				if p.r == int(ev.Fd) && p.r >= 0 {
					more = w.read(p, limit) || more
				}
			}
		}
		// A pipe read in full, and no more events than fit: the epoll is
		// empty (it keeps a pipe that holds more: level-triggered).
		if !more && n < len(w.events) {
			return got, exited
		}
	}
}

// read reads p once (ep said it would not block): it copies what it
// gets, or, at the end of the pipe, ends the copy. It reports whether
// p may hold more.
func (w *watch) read(p *watchedPipe, limit int) bool {
	b := w.buf
	if limit > 0 {
		if p.drained >= limit {
			w.end(p)
			return false
		}
		b = b[:min(len(b), limit-p.drained)]
	}
	n, err := unix.Read(p.r, b)
	for err == unix.EINTR {
		n, err = unix.Read(p.r, b)
	}
	if n <= 0 {
		w.end(p)
		return false
	}
	p.copy.copy(b[:n])
	p.drained += n
	return n == len(b)
}

// end ends p's copy: its unfinished line goes on, and its read end is
// closed.
func (w *watch) end(p *watchedPipe) {
	w.closeRead(p)
	p.copy.finish()
}

// drain reads the output to its end, waiting until deadline at most; then
// it copies what each pipe holds, up to pipecopy.MaxDrain bytes, and
// stops.
func (w *watch) drain(deadline time.Time) {
	for !w.ended() && time.Now().Before(deadline) {
		w.epf.SetReadDeadline(deadline)
		if _, err := w.poll(0); err != nil {
			break
		}
	}
	for _, p := range w.pipes {
		p.drained = 0
	}
	for !w.ended() {
		if got, _ := w.handle(pipecopy.MaxDrain); !got {
			break
		}
	}
	for _, p := range w.pipes {
		if p.r >= 0 {
			w.end(p)
		}
	}
}

// ended reports whether every pipe has ended.
func (w *watch) ended() bool {
	for _, p := range w.pipes {
		if p.r >= 0 {
			return false
		}
	}
	return true
}

// writeErr is the first error of the copies' writers.
func (w *watch) writeErr() error {
	for _, p := range w.pipes {
		if p.copy.err != nil {
			return p.copy.err
		}
	}
	return nil
}

// runWatched is runShell's way in the pool's own process: it starts c
// with syscall.ForkExec, its output going to pipes that a watch copies to
// stdout and stderr (a stdout that is a file already and is not tagged,
// a log file, is the command's own), and follows it to its end. It
// returns as runWaited does.
//
// The engine's goroutine that calls it is locked to no thread: the
// thread that starts the command lives as long as the process, and so
// the command's parent-death signal fires at the process's death only
// (see internal/spawn), without the spawning thread's hand-off.
func runWatched(ctx context.Context, c shellCmd, g *group, stdout, stderr io.Writer, prefix string, tail io.Writer) (ws syscall.WaitStatus, writeErr, err error) {
	w, err := getWatch()
	if err != nil {
		return ws, nil, err
	}
	defer w.release()
	stdin, err := devNull()
	if err != nil {
		return ws, nil, err
	}
	files := []uintptr{stdin.Fd(), 0, 0}
	if f, ok := ownStdout(stdout, prefix); ok {
		files[1] = f.Fd() // a log file: not the poller's
	} else {
		fd, err := w.pipe(newLineCopy(stdout, prefix, nil))
		if err != nil {
			return ws, nil, fmt.Errorf("standard output pipe: %w", err)
		}
		files[1] = uintptr(fd)
	}
	fd, err := w.pipe(newLineCopy(stderr, prefix, tail))
	if err != nil {
		return ws, nil, fmt.Errorf("standard error pipe: %w", err)
	}
	files[2] = uintptr(fd)
	sys := sysProcAttr()
	sys.PidFD = &w.pidfd
	attr := &syscall.ProcAttr{Dir: c.dir, Env: c.env, Files: files, Sys: sys}

	pid := -1
	if words := plainWords(c.run); words != nil {
		if path := lookPath(words[0], envValue(c.env, "PATH")); path != "" {
			if pid, err = syscall.ForkExec(path, words, attr); err != nil {
				pid = -1 // the shell says why
			}
		}
	}
	if pid < 0 {
		if pid, err = syscall.ForkExec("/bin/sh", []string{"/bin/sh", "-c", c.run}, attr); err != nil {
			return ws, nil, fmt.Errorf("starting sh: %w", &os.PathError{Op: "fork/exec", Path: "/bin/sh", Err: err})
		}
	}
	g.set(pid)
	running.add(pid)
	defer running.remove(pid)

	if err := w.started(pid); err != nil {
		// It cannot be followed: stop it.
		g.cancel(pid)
		g.kill()
		reap(pid)
		return ws, nil, fmt.Errorf("waiting for the command: %w", err)
	}
	cancelled := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(cancelled)
		g.cancel(pid)
		w.wake()
	})
	err = w.wait(g)
	if !stop() {
		// It signals the group through the shell's pid: not once that
		// pid is reaped, and free again.
		<-cancelled
	}
	if err != nil {
		g.kill()
	}
	ws, werr := reap(pid)
	if err == nil && werr != nil {
		err = fmt.Errorf("waiting for the command: %w", werr)
	}
	g.stop()
	w.drain(time.Now().Add(drainGrace))
	return ws, w.writeErr(), err
}

// reap waits for child pid's exit and reaps it.
func reap(pid int) (syscall.WaitStatus, error) {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			return ws, err
		}
	}
}
