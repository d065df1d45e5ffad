package main_test

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/proctest"
)

// keyLines returns the lines of inspect's output that list keys.
func keyLines(out string) []string {
	var keys []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "  ") {
			keys = append(keys, l)
		}
	}
	return keys
}

// TestInspectRun inspects a running poolrun run through poolrun's own
// process (its workers are goroutines of it), and through a job's command
// and run's janitor (which hold no window). A worker process (which holds
// no descriptor of the window, only a mapping) is inspected by
// TestInterruptAndInspect, of scaffold.
func TestInspectRun(t *testing.T) {
	dir := t.TempDir()
	wf := "items:\n  ref:\n    run: echo ref > \"$POOLRUN_ITEM\"\n" +
		"jobs:\n  - id: hold\n    needs: [ref]\n    run: sleep 20\n" +
		"  - id: later\n    needs: [ref]\n    after: [hold]\n    run: \"true\"\n"
	if err := os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(wf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(poolrunBin, "run", "-j", "1", "wf.yaml")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	parent := cmd.Process.Pid

	// Wait until the job holds the item: its command runs, and the window
	// lists the item.
	var job int
	var viaParent result
	deadline := time.Now().Add(60 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("the job's command did not start, or the window never listed its item; inspect said:\n%s%s", viaParent.stdout, viaParent.stderr)
		}
		time.Sleep(20 * time.Millisecond)
		// The job's command, not the item's build (which ends at once),
		// nor the janitor.
		for _, c := range proctest.Children(parent) {
			if strings.Contains(strings.Join(proctest.Cmdline(c), " "), "sleep 20") {
				job = c
			}
		}
		if job == 0 {
			continue
		}
		if viaParent = poolrun(t, dir, "inspect", strconv.Itoa(parent)); len(keyLines(viaParent.stdout)) == 1 {
			break
		}
	}
	if viaParent.code != 0 || !strings.Contains(viaParent.stdout, "poolrun.item:ref@") {
		t.Errorf("inspect %d (the parent): exit %d, want 0 and the item named\n%s%s", parent, viaParent.code, viaParent.stdout, viaParent.stderr)
	}
	t.Logf("inspect %d (poolrun):\n%s", parent, viaParent.stdout)

	for _, c := range proctest.Children(parent) {
		if c == job {
			continue
		}
		if r := poolrun(t, dir, "inspect", strconv.Itoa(c)); r.code != 2 || !strings.Contains(r.stderr, "holds no poolrun window") {
			t.Errorf("inspect %d (the janitor): exit %d, want 2 and \"holds no poolrun window\"\n%s", c, r.code, r.stderr)
		}
	}

	viaJob := poolrun(t, dir, "inspect", strconv.Itoa(job))
	if viaJob.code != 2 || !strings.Contains(viaJob.stderr, "holds no poolrun window") {
		t.Errorf("inspect %d (a job's command): exit %d, want 2 and \"holds no poolrun window\"\n%s", job, viaJob.code, viaJob.stderr)
	}
}

// TestInspectOtherBuild: inspect tells a window of another layout version
// (another build of poolrun) from a file that is not a window at all. This
// test process holds each file under a window's name, as a pool would.
func TestInspectOtherBuild(t *testing.T) {
	page := os.Getpagesize()
	window := func(version uint64) []byte {
		b := make([]byte, 2*page) // header page and the slots of 8 keys
		copy(b, "poolrunW")
		binary.NativeEndian.PutUint64(b[8:], version)
		binary.NativeEndian.PutUint64(b[16:], 8)
		return b
	}
	tests := []struct {
		name string
		data []byte
		want []string
	}{
		{"next layout version", window(2), []string{"another build of poolrun", "layout version is 2"}},
		{"not a window", []byte(strings.Repeat("garbage ", page/4)), []string{"not a valid", "magic"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "poolrun-window-0123456789abcdef")
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			r := poolrun(t, t.TempDir(), "inspect", strconv.Itoa(os.Getpid()))
			if r.code != 1 {
				t.Errorf("exit %d, want 1", r.code)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr %q does not say %q", r.stderr, w)
				}
			}
		})
	}
}

// TestInspectNoWindow: a process without a window, or no process at all, is
// bad input (exit status 2) with a message that says which.
func TestInspectNoWindow(t *testing.T) {
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		pid  int
		want string
	}{
		{"no window", os.Getpid(), "holds no poolrun window"},
		{"no process", ended.Process.Pid, "no process"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := poolrun(t, t.TempDir(), "inspect", strconv.Itoa(tt.pid))
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("inspect %d: exit %d, want 2 and %q\n%s", tt.pid, r.code, tt.want, r.stderr)
			}
		})
	}
}
