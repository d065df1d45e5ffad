package execflow

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/poolrun/poolrun/internal/workflow"
)

// workflowFile writes an empty workflow file wf.yaml in a new folder and
// returns its path.
func workflowFile(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "wf.yaml")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestLockWorkflow(t *testing.T) {
	file := workflowFile(t)
	name := workflow.LockFile(file)
	first, err := LockWorkflow(context.Background(), file, false)
	if err != nil {
		t.Fatal(err)
	}
	// flock(2) locks are per open file: a second open in this process
	// is refused as another process's would be.
	_, err = LockWorkflow(context.Background(), file, false)
	var locked *LockedError
	if !errors.As(err, &locked) || locked.PID != os.Getpid() || locked.File != file {
		t.Fatalf("second lock: %v, want a LockedError naming pid %d", err, os.Getpid())
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("given up")
	cancel(stop)
	if _, err := LockWorkflow(ctx, file, true); !errors.Is(err, stop) {
		t.Errorf("waiting with a cancelled context: %v, want its cause", err)
	}
	if err := first.Unlock(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(name); !os.IsNotExist(err) {
		t.Errorf("the lock file is left after Unlock: %v", err)
	}
	again, err := LockWorkflow(context.Background(), file, false)
	if err != nil {
		t.Fatalf("lock after Unlock: %v", err)
	}
	again.Unlock()
}

// The lock is the workflow file's, whatever name it is reached by: a
// symbolic link to it, or a hard link in another folder, is refused while
// it is held, naming this process, and takes no lock file of its own; once
// it is let go, the other name locks.
func TestLockWorkflowLinks(t *testing.T) {
	file := workflowFile(t)
	other := t.TempDir()
	links := map[string]func(string, string) error{
		filepath.Join(filepath.Dir(file), "link.yaml"): os.Symlink,
		filepath.Join(other, "hard.yaml"):              os.Link,
	}
	for link, makeLink := range links {
		if err := makeLink(file, link); err != nil {
			t.Fatal(err)
		}
	}
	first, err := LockWorkflow(context.Background(), file, false)
	if err != nil {
		t.Fatal(err)
	}
	for link := range links {
		_, err := LockWorkflow(context.Background(), link, false)
		var locked *LockedError
		if !errors.As(err, &locked) || locked.PID != os.Getpid() || locked.File != link {
			t.Errorf("lock through %s: %v, want a LockedError naming pid %d", link, err, os.Getpid())
		}
		if exists(workflow.LockFile(link)) {
			t.Errorf("the refused lock through %s left its lock file", link)
		}
	}
	if err := first.Unlock(); err != nil {
		t.Fatal(err)
	}
	for link := range links {
		l, err := LockWorkflow(context.Background(), link, false)
		if err != nil {
			t.Errorf("lock through %s once the first is let go: %v", link, err)
			continue
		}
		l.Unlock()
	}
}

// removeDeadLock removes a lock file only when nobody holds it and it
// names the dead process.
func TestRemoveDeadLock(t *testing.T) {
	file := workflowFile(t)
	name := workflow.LockFile(file)
	const dead = 1 << 22 // above pid_max's ceiling: no process has it
	write := func(pid int) {
		if err := os.WriteFile(name, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(dead + 1)
	if err := removeDeadLock(name, dead); err != nil || !exists(name) {
		t.Errorf("another pid's lock file: %v, exists %v; want it kept", err, exists(name))
	}
	l, err := LockWorkflow(context.Background(), file, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := removeDeadLock(name, os.Getpid()); err != nil || !exists(name) {
		t.Errorf("a held lock file: %v, exists %v; want it kept", err, exists(name))
	}
	l.f.Close() // let go without removing it, as a killed run does
	l.wf.Close()
	write(dead)
	if err := removeDeadLock(name, dead); err != nil || exists(name) {
		t.Errorf("a dead run's lock file: %v, exists %v; want it removed", err, exists(name))
	}
	if err := removeDeadLock(name, dead); err != nil {
		t.Errorf("no lock file: %v", err)
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// removeUnheld removes a file only when nobody holds a lock of it, and
// leaves what is not a regular file alone.
func TestRemoveUnheld(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "run.join")
	if err := os.WriteFile(name, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	held, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := flock(held, syscall.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	if err := removeUnheld(name); err != nil || !exists(name) {
		t.Errorf("a held file: %v, exists %v; want it kept", err, exists(name))
	}
	held.Close()
	if err := removeUnheld(name); err != nil || exists(name) {
		t.Errorf("a file nobody holds: %v, exists %v; want it removed", err, exists(name))
	}
	if err := removeUnheld(name); err != nil {
		t.Errorf("no file: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := removeUnheld(fifo); err != nil || !exists(fifo) {
		t.Errorf("a FIFO: %v, exists %v; want it kept", err, exists(fifo))
	}
}
