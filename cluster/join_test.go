package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cluster"
	"github.com/poolrun/poolrun/engine"
)

// TestCheckOutputs: a folder this process can write in passes, and the
// probe leaves nothing in it; a folder that does not exist, or a file, is
// refused with an error that names it and this host.
func TestCheckOutputs(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	if err := (cluster.Join{Outputs: []string{dir}}).CheckOutputs(); err != nil {
		t.Fatal(err)
	}
	if names, _ := os.ReadDir(dir); len(names) != 1 {
		t.Errorf("the probe left %v", names)
	}
	host, _ := os.Hostname()
	for _, bad := range []string{filepath.Join(dir, "gone"), file} {
		err := cluster.Join{Outputs: []string{dir, bad}}.CheckOutputs()
		if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "("+host+")") {
			t.Errorf("%s: %v, want an error that names it and host %s", bad, err, host)
		}
	}
	if os.Getuid() != 0 {
		ro := filepath.Join(dir, "ro")
		os.Mkdir(ro, 0o500)
		if err := (cluster.Join{Outputs: []string{ro}}).CheckOutputs(); err == nil || !strings.Contains(err.Error(), ro) {
			t.Errorf("read-only %s: %v, want an error that names it", ro, err)
		}
	}
}

// TestWorkerCannotWrite: a worker process whose view of the pool's output
// folder is not writable (here the folder is gone, as on a host that does
// not share it) refuses to join: status 1, a message naming the folder and
// its host, and the pool never has a worker.
func TestWorkerCannotWrite(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	joinFile := filepath.Join(dir, "run.join")
	l, err := listen("", joinFile, cluster.Outputs(out))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if j, err := cluster.ReadJoinFile(joinFile); err != nil || len(j.Outputs) != 1 || j.Outputs[0] != out {
		t.Fatalf("join file: %+v, %v; want the output folder %s", j, err, out)
	}
	os.Remove(out)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := engine.New(engine.RemoteOnly(time.Minute), l.Option())
	engine.Queue(p, slowSquare, 3)
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx) }()

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envJoin+"="+joinFile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	host, _ := os.Hostname()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("the worker: %v, want exit status 1", err)
	}
	if msg := stderr.String(); !strings.Contains(msg, out) || !strings.Contains(msg, host) || !strings.Contains(msg, "cannot write") {
		t.Errorf("the worker said %q; want it to name %s and host %s", msg, out, host)
	}
	if st := p.Stats(); len(st.Workers) != 0 {
		t.Errorf("the pool has workers %+v, want none", st.Workers)
	}
	cancel()
	<-ran
}

// TestJoinFileOwner: a join file that another user owns is refused, root
// or not, with an error that names the file, its owner and the fix; one
// of this user's own is read.
func TestJoinFileOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another user needs root")
	}
	path := filepath.Join(t.TempDir(), "run.join")
	if err := cluster.WriteJoinFile(path, cluster.Join{URL: "nats://127.0.0.1:4222", Token: "t", Protocol: 1}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := cluster.ReadJoinFile(path)
	for _, want := range []string{path + " is owned by uid 65534, not by this process's user (uid 0)", "chown 0 " + path} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("another user's join file: %v; want an error saying %q", err, want)
		}
	}
	if err := os.Chown(path, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.ReadJoinFile(path); err != nil {
		t.Errorf("this user's join file: %v", err)
	}
}

// TestListenerHoldsJoinFile: while a Listener is open it holds a flock(2)
// of its join file, so that an exclusive lock cannot be had and a second
// Listen with the same join file is refused, and Close removes the file.
// A file that another pool has written at the path since is left to it.
func TestListenerHoldsJoinFile(t *testing.T) {
	dir := t.TempDir()
	for _, replaced := range []bool{false, true} {
		t.Run(fmt.Sprintf("replaced %v", replaced), func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("run-%v.join", replaced))
			l, err := listen("", path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			f.Close()
			if !errors.Is(err, syscall.EWOULDBLOCK) {
				t.Errorf("an exclusive lock of the open listener's join file: %v; want EWOULDBLOCK", err)
			}
			if l2, err := listen("", path); err == nil || !strings.Contains(err.Error(), "another pool that runs now holds it") {
				t.Errorf("a second Listen with the join file of an open one: %v; want it refused", err)
				if l2 != nil {
					l2.Close()
				}
			}
			if replaced {
				if err := cluster.WriteJoinFile(path, cluster.Join{URL: "nats://x:1", Token: "t", Protocol: 1}); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			_, err = os.Lstat(path)
			if replaced && err != nil {
				t.Errorf("Close removed a join file written since: %v", err)
			}
			if !replaced && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the join file after Close: %v; want it removed", err)
			}
		})
	}
}

// TestListenerCloseTwice: a second Close of a Listener does nothing and
// returns what the first returned (it panicked, closing a closed channel).
func TestListenerCloseTwice(t *testing.T) {
	l, err := listen("", filepath.Join(t.TempDir(), "run.join"))
	if err != nil {
		t.Fatal(err)
	}
	first := l.Close()
	if first != nil {
		t.Fatalf("Close: %v", first)
	}
	for range 2 {
		if err := l.Close(); err != first {
			t.Errorf("Close again: %v, want %v as the first", err, first)
		}
	}
}
