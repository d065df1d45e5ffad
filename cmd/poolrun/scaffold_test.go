package main_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/proctest"
	"github.com/poolrun/poolrun/shm"
)

const tinyScale = "0.03"

func TestScaffoldChecksumAgrees(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sums := map[string]string{}
	for _, mode := range [][]string{{"-j", "1"}, {"-j", "2"}, {"--serial"}} {
		name := strings.Join(mode, " ")
		args := append([]string{"scaffold", "--scale", tinyScale, "--out", "out-" + strings.ReplaceAll(name, " ", "")}, mode...)
		r := poolrun(t, dir, args...)
		if r.code != 0 {
			t.Fatalf("poolrun %s: exit %d\n%s%s", name, r.code, r.stdout, r.stderr)
		}
		sum := line(r.stdout, "checksum:")
		if len(sum) != 16 {
			t.Fatalf("poolrun %s printed no checksum:\n%s", name, r.stdout)
		}
		sums[name] = sum
		if !strings.Contains(r.stdout, "peak cache") || line(r.stdout, "cells:") == "" {
			t.Errorf("poolrun %s: no summary table or cell counts:\n%s", name, r.stdout)
		}
	}
	if sums["-j 1"] != sums["-j 2"] || sums["-j 1"] != sums["--serial"] {
		t.Errorf("checksums differ: %v", sums)
	}
}

func TestScaffoldDefaultIsScaffold(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := poolrun(t, dir, "--scale", tinyScale, "-j", "2", "--quiet", "--out", "a")
	b := poolrun(t, dir, "scaffold", "--scale", tinyScale, "-j", "2", "--quiet", "--out", "b")
	if a.code != 0 || b.code != 0 {
		t.Fatalf("exit %d and %d\n%s%s", a.code, b.code, a.stderr, b.stderr)
	}
	if sa, sb := line(a.stdout, "checksum:"), line(b.stdout, "checksum:"); sa == "" || sa != sb {
		t.Errorf("poolrun and poolrun scaffold disagree: %q %q", sa, sb)
	}
	if strings.Contains(a.stdout, "peak cache") {
		t.Errorf("--quiet printed the table:\n%s", a.stdout)
	}
}

func TestScaffoldBadConfig(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, yaml, want string
	}{
		{"unknown field", "seed: 1\nbox:\n  size: [10, 10, 10]\n  chunk: 5\n  colour: red\n", "cfg.yaml:5:"},
		{"yaml syntax", "seed: [1\n", "cfg.yaml:"},
		{"unknown cell type in a rule", strings.Replace(string(mustRead(t, "print")), "from: golgi", "from: purkinje", 1), "purkinje"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			os.WriteFile(filepath.Join(dir, "cfg.yaml"), []byte(c.yaml), 0o644)
			r := poolrun(t, dir, "scaffold", "--config", "cfg.yaml", "--out", "out-bad")
			if r.code != 2 {
				t.Errorf("exit %d, want 2", r.code)
			}
			if !strings.Contains(r.stderr, c.want) {
				t.Errorf("stderr %q does not contain %q", r.stderr, c.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "out-bad")); err == nil {
				t.Error("the output folder was created: something ran")
			}
		})
	}
}

// mustRead returns the embedded configuration (poolrun scaffold --print-config).
func mustRead(t *testing.T, _ string) []byte {
	r := poolrun(t, t.TempDir(), "scaffold", "--print-config")
	if r.code != 0 || !strings.Contains(r.stdout, "cell_types:") {
		t.Fatalf("--print-config: exit %d\n%s", r.code, r.stdout)
	}
	return []byte(r.stdout)
}

func TestUsage(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"--help"}, {"help"}, {"scaffold", "--help"}, {"run", "--help"}, {"inspect", "--help"}, {"help", "scaffold"}} {
		r := poolrun(t, dir, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage:") {
			t.Errorf("poolrun %v: exit %d, stdout:\n%s", args, r.code, r.stdout)
		}
		if args[0] != "help" && args[0] != "--help" && !strings.Contains(r.stdout, "Example") {
			t.Errorf("poolrun %v: the help has no example", args)
		}
	}
	for _, args := range [][]string{{"frobnicate"}, {"scaffold", "--no-such-flag"}, {"-j", "-1"}, {"scaffold", "--scale", "-1"}, {"inspect"}, {"inspect", "notapid"}} {
		if r := poolrun(t, dir, args...); r.code != 2 {
			t.Errorf("poolrun %v: exit %d, want 2\n%s", args, r.code, r.stderr)
		}
	}
}

// TestInterruptAndInspect starts a scaffold run, inspects its window while
// it runs (through the parent, and through a worker: read through its
// parent's descriptor), interrupts it with SIGINT, and checks what it leaves: exit status
// 130, no worker process, no temporary output file.
func TestInterruptAndInspect(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(poolrunBin, "scaffold", "-j", "2", "--scale", "0.5", "--out", "out")
	cmd.Dir = dir
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// Wait until the pool runs: its workers exist, it has published the
	// items it requires in its window, and a worker maps the window.
	var workers []int
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := proctest.Poll(ctx, "two workers and a published window", 20*time.Millisecond, func() bool {
		workers = proctest.Children(cmd.Process.Pid)
		return len(workers) >= 2 && publishedWindow(cmd.Process.Pid) && holdsWindow(workers[0])
	})
	if err != nil {
		t.Fatalf("%v (workers %v)", err, workers)
	}
	r := poolrun(t, dir, "inspect", strconv.Itoa(cmd.Process.Pid))
	if r.code != 0 || !strings.Contains(r.stdout, "generation") {
		t.Errorf("inspect: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The indexes of the source types are required from the start until
	// their rules are done; inspect names them.
	if !strings.Contains(r.stdout, "scaffold.index:granule@") {
		t.Errorf("inspect does not list the granule index by name:\n%s", r.stdout)
	}
	t.Logf("inspect:\n%s", r.stdout)
	// A worker's window is its parent's: it is read through the parent's
	// descriptor, with the parent's names.
	viaWorker := poolrun(t, dir, "inspect", strconv.Itoa(workers[0]))
	if want := "window of process " + strconv.Itoa(workers[0]) + " (read through its parent " + strconv.Itoa(cmd.Process.Pid) + ")"; viaWorker.code != 0 || !strings.Contains(viaWorker.stdout, want) {
		t.Errorf("inspect %d (a worker): exit %d, want 0 and %q\n%s%s", workers[0], viaWorker.code, want, viaWorker.stdout, viaWorker.stderr)
	}

	cmd.Process.Signal(syscall.SIGINT)
	var msgs []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		msgs = append(msgs, sc.Text())
	}
	err = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit status %d (%v), want 130; stderr:\n%s", code, err, strings.Join(msgs, "\n"))
	}
	if left := proctest.WaitGone(workers, 10*time.Second); len(left) > 0 {
		t.Errorf("workers %v still alive after poolrun exited", left)
	}
	filepath.WalkDir(filepath.Join(dir, "out"), func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".tmp") {
			t.Errorf("half-written file left: %s", path)
		}
		return nil
	})
}

// publishedWindow reports whether process pid holds a window, as a pool's
// parent does, in which it has published a set of required items.
func publishedWindow(pid int) bool {
	held, _ := shm.Find(pid)
	for _, h := range held {
		if h.FD >= 0 && windowHasKeys(h.Path) {
			return true
		}
	}
	return false
}

// windowHasKeys reports whether the window at path lists a key.
func windowHasKeys(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	w, err := shm.Open(f)
	if err != nil {
		return false
	}
	defer w.Close()
	s, err := w.Snapshot(nil)
	return err == nil && (len(s.Keys) > 0 || s.Overflow)
}

// holdsWindow reports whether process pid maps or holds a window, as a
// pool's worker does.
func holdsWindow(pid int) bool {
	held, _ := shm.Find(pid)
	return len(held) > 0
}

// TestScaffoldExamples runs every scaffold configuration of examples/
// (scaffold-*.yaml), small, on 2 workers and serially: the same checksum.
func TestScaffoldExamples(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../../examples/scaffold-*.yaml")
	for _, f := range files {
		abs, _ := filepath.Abs(f)
		t.Run(filepath.Base(f), func(t *testing.T) {
			dir := t.TempDir()
			var sums []string
			for _, mode := range []string{"-j=2", "--serial"} {
				r := poolrun(t, dir, "scaffold", "--config", abs, "--scale", tinyScale, "--quiet", "--out", "out"+mode, mode)
				if r.code != 0 {
					t.Fatalf("%s: exit %d\n%s%s", mode, r.code, r.stdout, r.stderr)
				}
				sums = append(sums, line(r.stdout, "checksum:"))
			}
			if sums[0] == "" || sums[0] != sums[1] {
				t.Errorf("checksums %q", sums)
			}
		})
	}
}
