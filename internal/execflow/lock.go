package execflow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/poolrun/poolrun/internal/workflow"
)

// This file keeps two runs of one workflow from running at once: they
// would share its state file and its outputs.

// lockPoll is how often a run that waits for another's lock tries again.
const lockPoll = 50 * time.Millisecond

// A LockedError is returned by [LockWorkflow] when another run of the
// workflow holds its lock and the caller would not wait.
type LockedError struct {
	File string // the workflow file
	PID  int    // the process that holds the lock, as it wrote it; 0 if unknown
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("%s is being run by %s: wait for it to end, or give --wait", e.File, e.Holder())
}

// Holder names the process that holds the lock: "another poolrun (pid
// N)", or "another poolrun" when its pid is unknown.
func (e *LockedError) Holder() string {
	if e.PID > 0 {
		return fmt.Sprintf("another poolrun (pid %d)", e.PID)
	}
	return "another poolrun"
}

// A Lock is held by the one run of a workflow that may run it now.
type Lock struct {
	f    *os.File
	path string
}

// LockWorkflow takes the lock of the workflow file at path: an exclusive
// flock(2) of its lock file, [workflow.LockFile](path), created if need
// be, into which it writes this process's pid. The lock dies with its
// holder: the kernel drops it when the process ends, however it ends.
// When another process holds it, LockWorkflow returns a [*LockedError]
// that names that process, or, when wait is true, waits until it can take
// the lock or ctx is done (then it returns ctx's cause). [Lock.Unlock]
// removes the lock file and lets the next run go.
func LockWorkflow(ctx context.Context, path string, wait bool) (*Lock, error) {
	name := workflow.LockFile(path)
	for {
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o666)
		if err != nil {
			return nil, fmt.Errorf("execflow: taking the lock of %s: %w", path, err)
		}
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
			f.Close()
			return nil, fmt.Errorf("execflow: taking the lock of %s: %s is not a regular file", path, name)
		}
		for {
			err = flock(f, syscall.LOCK_EX|syscall.LOCK_NB)
			if !errors.Is(err, syscall.EWOULDBLOCK) {
				break
			}
			if !wait {
				pid := holder(f)
				f.Close()
				return nil, &LockedError{File: path, PID: pid}
			}
			select {
			case <-ctx.Done():
				f.Close()
				return nil, context.Cause(ctx)
			case <-time.After(lockPoll):
			}
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("execflow: taking the lock of %s: %w", path, err)
		}
		// The run before may have removed the file as it let go: the lock
		// is ours only if name is still the file locked.
		if !samePath(f, name) {
			f.Close()
			continue
		}
		// The pid is for the message of a run that finds the lock taken;
		// without it that run names no one.
		if f.Truncate(0) == nil {
			f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		}
		return &Lock{f: f, path: name}, nil
	}
}

// Unlock removes the lock file and lets the lock go. Unlocking a nil Lock
// does nothing.
func (l *Lock) Unlock() error {
	if l == nil {
		return nil
	}
	var err error
	if samePath(l.f, l.path) {
		err = os.Remove(l.path)
	}
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// holder returns the pid written in the lock file f, 0 if there is none.
func holder(f *os.File) int {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 32))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// samePath reports whether name is the file f is open on.
func samePath(f *os.File, name string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(name)
	return err == nil && os.SameFile(a, b)
}

// removeDeadLock removes the lock file name that process pid, which has
// ended, held: only if no one holds its lock now and it still names pid,
// so that a run that has taken it since keeps it. A file that is not
// there is no error.
func removeDeadLock(name string, pid int) error {
	f, err := os.OpenFile(name, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil // not ours to touch
	}
	if flock(f, syscall.LOCK_EX|syscall.LOCK_NB) != nil || holder(f) != pid || !samePath(f, name) {
		return nil // taken, or another's
	}
	return os.Remove(name)
}

// removeUnheld removes the regular file name unless some process holds a
// flock(2) of it: a pool's join file, which the pool holds while it runs
// (package cluster). A file that is not there, or not a regular file, is
// left alone with no error.
func removeUnheld(name string) error {
	if fi, err := os.Lstat(name); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if flock(f, syscall.LOCK_EX|syscall.LOCK_NB) != nil || !samePath(f, name) {
		return nil // held, or replaced since
	}
	return os.Remove(name)
}
