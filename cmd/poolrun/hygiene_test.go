package main_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
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

// The process hygiene of issue 11: what a run leaves behind when a worker
// is killed, what Ctrl-Z stops, the modes of what poolrun writes, and what
// the commands of a workflow inherit.

// uniqueArg returns a number for sleep, "whole.digits", that no other
// process on the host has on its command line: its pid and a random part.
func uniqueArg(whole int) string {
	return fmt.Sprintf("%d.%d%06d", whole, os.Getpid(), rand.IntN(1_000_000))
}

// procsWithArgs returns the live processes whose command line is exactly
// args.
func procsWithArgs(args ...string) []int {
	want := strings.Join(args, "\x00") + "\x00"
	return proctest.Find("cmdline", func(data []byte) bool { return string(data) == want })
}

// waitProcs waits, for a generous while, until a live process has exactly
// args as its command line, and returns those that do.
func waitProcs(t *testing.T, args ...string) []int {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if pids := procsWithArgs(args...); len(pids) > 0 {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process %q after a minute", args)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killAll kills, at the end of the test, whatever runs with args.
func killAll(t *testing.T, args ...string) {
	t.Cleanup(func() {
		for _, pid := range procsWithArgs(args...) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// waitStopped waits, for a generous while, until every pid is stopped,
// and fails the test for those that are not. Stopped is state T, or D with
// a child in T: a shell that waits in vfork for a child stopped before its
// exec stays in D (uninterruptible) until the child goes on.
func waitStopped(t *testing.T, what string, pids ...int) {
	t.Helper()
	stopped := func(pid int) bool {
		switch proctest.State(pid) {
		case "T":
			return true
		case "D":
			for _, c := range proctest.Children(pid) {
				if proctest.State(c) == "T" {
					return true
				}
			}
		}
		return false
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range pids {
		for !stopped(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if !stopped(pid) {
			t.Errorf("%s %d is in state %q, not stopped (T)", what, pid, proctest.State(pid))
		}
	}
}

// startPoolrun starts poolrun in dir with args; it is killed at the end of
// the test. Its output is in the returned buffers once it has exited.
func startPoolrun(t *testing.T, dir string, env []string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(poolrunBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, &out
}

// TestRunKilledLeavesNothing is item 3 of issue 11, now that poolrun
// run's workers are goroutines of its process: poolrun killed with SIGKILL
// while a command runs leaves nothing behind, at once and not at the next
// run: its janitor removes poolrun's scratch folder, kills the command's
// child (the sleep of "sleep 20; echo hi", which the parent-death signal
// of the shell does not reach), and exits. (It was a worker process that
// was killed; run has none now, and a remote worker's death is
// TestRunRetries'.)
func TestRunKilledLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	arg := uniqueArg(20)
	killAll(t, "sleep", arg)
	wf := fmt.Sprintf(`items:
  ref:
    run: echo data > "$POOLRUN_ITEM"
jobs:
  - id: long
    needs: [ref]
    run: sleep %s; echo hi
`, arg)
	os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(wf), 0o644)
	cmd, _ := startPoolrun(t, dir, nil, "run", "-j", "1", "wf.yaml")
	sleeps := waitProcs(t, "sleep", arg)
	children := proctest.Children(cmd.Process.Pid) // the command's shell and the janitor
	if len(children) != 2 {
		t.Fatalf("poolrun has children %v, want the command's shell and the janitor", children)
	}
	scratch := scratchFolders([]int{cmd.Process.Pid})
	if len(scratch) == 0 {
		t.Fatalf("poolrun (pid %d) has no scratch folder: the test proves nothing", cmd.Process.Pid)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed := time.Now()
	deadline := killed.Add(30 * time.Second)
	for {
		var left []string
		for _, f := range scratch {
			if _, err := os.Lstat(f); err == nil {
				left = append(left, f)
			}
		}
		orphans := procsWithArgs("sleep", arg)
		alive := proctest.WaitGone(children, 0)
		if len(left) == 0 && len(orphans) == 0 && len(alive) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after poolrun was killed: scratch folders %q, sleep %v (was %v), children %v (of %v) still there", left, orphans, sleeps, alive, children)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("the scratch folder, the command's child and the janitor were gone %v after poolrun", time.Since(killed).Round(time.Millisecond))
}

// TestCtrlZStopsCommands sends poolrun the terminal's stop (SIGTSTP), as
// Ctrl-Z does: poolrun and the command's processes are all
// stopped, and make no progress; once poolrun is continued (SIGCONT, as fg
// sends it), so are they, and the run completes.
func TestCtrlZStopsCommands(t *testing.T) {
	t.Parallel()
	for _, mode := range [][]string{{"-j", "1"}, {"--serial"}} {
		t.Run(strings.Join(mode, " "), func(t *testing.T) {
			dir := t.TempDir()
			arg := uniqueArg(2)
			killAll(t, "sleep", arg)
			wf := fmt.Sprintf("jobs:\n  - id: long\n    run: echo $$ > shell.pid; sleep %s; echo done > done.txt\n", arg)
			os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(wf), 0o644)
			cmd, out := startPoolrun(t, dir, nil, append(append([]string{"run", "--quiet"}, mode...), "wf.yaml")...)
			sleeps := waitProcs(t, "sleep", arg)
			started := time.Now()
			if err := cmd.Process.Signal(syscall.SIGTSTP); err != nil {
				t.Fatal(err)
			}
			waitStopped(t, "poolrun", cmd.Process.Pid)
			waitStopped(t, "the command's sleep", sleeps...)
			data, _ := os.ReadFile(filepath.Join(dir, "shell.pid"))
			if shell, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
				waitStopped(t, "the command's shell", shell)
			} else {
				t.Errorf("shell.pid: %q", data)
			}
			// run's workers are goroutines of poolrun (stopped with it);
			// its janitor, which only waits for poolrun's end, is not
			// stopped.
			// The sleep's time passes while everything is stopped: nothing
			// runs on.
			secs, _ := strconv.ParseFloat(arg, 64)
			time.Sleep(time.Until(started.Add(time.Duration(secs*float64(time.Second)) + 300*time.Millisecond)))
			if _, err := os.Stat(filepath.Join(dir, "done.txt")); err == nil {
				t.Error("the command went on while poolrun was stopped")
			}
			if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("poolrun: %v\n%s", err, out)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("poolrun did not end within a minute of SIGCONT (state %q; the sleep's %q)", proctest.State(cmd.Process.Pid), proctest.State(sleeps[0]))
			}
			if _, err := os.Stat(filepath.Join(dir, "done.txt")); err != nil {
				t.Errorf("the command did not complete: %v", err)
			}
		})
	}
}

// inUmask returns the arguments of a shell that runs poolrun with args
// under umask mask.
func inUmask(mask string, args ...string) []string {
	return append([]string{"/bin/sh", "-c", "umask " + mask + ` && exec "$0" "$@"`, poolrunBin}, args...)
}

// runIn runs argv in dir and returns its exit status and output.
func runIn(t *testing.T, dir string, env []string, argv ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// okFlow is a workflow of one job that succeeds.
const okFlow = "jobs:\n  - id: a\n    run: \"true\"\n"

// umasks are the umasks under which the modes of poolrun's files are
// checked: one that lets the group write, one that keeps everything
// private.
var umasks = []os.FileMode{0o002, 0o077}

// checkMode fails the test unless path has the permissions want.
func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Error(err)
		return
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s: mode %v, want %v", path, got, want)
	}
}

// TestReportModeFollowsUmask runs poolrun run with --report under two
// umasks: the JSON report (written alike by every command) gets mode 0666
// less the umask, as any Unix tool's file does.
func TestReportModeFollowsUmask(t *testing.T) {
	for _, mask := range umasks {
		t.Run(fmt.Sprintf("umask %03o", mask), func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "ok.yaml"), []byte(okFlow), 0o644)
			m := fmt.Sprintf("%03o", mask)
			if code, out := runIn(t, dir, nil, inUmask(m, "run", "--quiet", "--report", "run.json", "ok.yaml")...); code != 0 {
				t.Fatalf("run: exit %d\n%s", code, out)
			}
			checkMode(t, filepath.Join(dir, "run.json"), 0o666&^mask)
		})
	}
}

// TestDataFilesFollowUmask runs poolrun scaffold under two umasks: its data
// files get mode 0666 and the folders that hold them 0777, less the umask.
func TestDataFilesFollowUmask(t *testing.T) {
	t.Parallel()
	for _, mask := range umasks {
		t.Run(fmt.Sprintf("umask %03o", mask), func(t *testing.T) {
			dir := t.TempDir()
			if code, out := runIn(t, dir, nil, inUmask(fmt.Sprintf("%03o", mask), "scaffold", "--quiet", "-j", "1", "--scale", tinyScale, "--out", "out")...); code != 0 {
				t.Fatalf("scaffold: exit %d\n%s", code, out)
			}
			out := filepath.Join(dir, "out")
			files := 0
			filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
				switch {
				case err != nil:
					t.Error(err)
				case path == out:
					// Made by the command, not by a data file's write.
				case d.IsDir():
					checkMode(t, path, 0o777&^mask)
				default:
					checkMode(t, path, 0o666&^mask)
					files++
				}
				return nil
			})
			if files == 0 {
				t.Error("the scaffold wrote no file")
			}
		})
	}
}

// victimFile makes a file for planted links to point at, and returns it
// and the check that it is intact.
func victimFile(t *testing.T) (string, func(what string)) {
	victim := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	return victim, func(what string) {
		t.Helper()
		if data, err := os.ReadFile(victim); err != nil || string(data) != "precious" {
			t.Errorf("%s: the link's target holds %q, %v", what, data, err)
		}
	}
}

// TestReportLinkRefused plants a symbolic link where poolrun run writes its
// report: the report is refused, with a message that names it, and the
// link's target is left as it was.
func TestReportLinkRefused(t *testing.T) {
	dir := t.TempDir()
	victim, intact := victimFile(t)
	os.WriteFile(filepath.Join(dir, "ok.yaml"), []byte(okFlow), 0o644)
	os.Symlink(victim, filepath.Join(dir, "report.json"))
	r := poolrun(t, dir, "run", "--quiet", "--report", "report.json", "ok.yaml")
	if r.code == 0 || !strings.Contains(r.stderr, "report.json") || !strings.Contains(r.stderr, "symbolic link") {
		t.Errorf("a report over a link: exit %d, stderr %q; want a failure that names it", r.code, r.stderr)
	}
	intact("the report")
}

// TestDataFileLinkRefused plants a symbolic link where poolrun scaffold
// writes a data file: that job fails with a message that names the file,
// and the link's target is left as it was.
func TestDataFileLinkRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	victim, intact := victimFile(t)
	if r := poolrun(t, dir, "scaffold", "--quiet", "-j", "1", "--scale", tinyScale, "--out", "out"); r.code != 0 {
		t.Fatalf("scaffold: exit %d\n%s", r.code, r.stderr)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "out", "placement", "*", "*.bin"))
	if len(files) == 0 {
		t.Fatal("the scaffold wrote no placement file")
	}
	os.Remove(files[0])
	if err := os.Symlink(victim, files[0]); err != nil {
		t.Fatal(err)
	}
	r := poolrun(t, dir, "scaffold", "--quiet", "-j", "1", "--scale", tinyScale, "--out", "out")
	if r.code == 0 || !strings.Contains(r.stderr, files[0]) || !strings.Contains(r.stderr, "symbolic link") {
		t.Errorf("a data file over a link: exit %d, stderr %q; want a failure that names it", r.code, r.stderr)
	}
	intact("the data file")
}

// TestCommandsInheritNothing checks, through the binary, what a command
// gets from poolrun, with a worker and serially: no descriptor but 0, 1
// and 2, and none of poolrun's POOLRUN_* variables but its own job id: not
// the engine's worker marker, so that a poolrun started by a command runs
// its own workflow (it would take itself for a worker otherwise), nor the
// job id and item paths of an outer run.
func TestCommandsInheritNothing(t *testing.T) {
	for _, mode := range [][]string{{"-j", "1"}, {"--serial"}} {
		t.Run(strings.Join(mode, " "), func(t *testing.T) {
			dir := t.TempDir()
			// The inner shell lists the descriptors of the command's shell
			// before that opens any of its own (see execflow's TestEnv).
			wf := fmt.Sprintf(`jobs:
  - id: outer
    run: |
      sh -c 'ls -l /proc/$PPID/fd > fds.txt'
      env > env.txt
      %q run --quiet inner.yaml
`, poolrunBin)
			os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(wf), 0o644)
			os.WriteFile(filepath.Join(dir, "inner.yaml"), []byte("jobs:\n  - id: inner\n    run: echo \"$POOLRUN_JOB\" > inner.txt\n"), 0o644)
			env := []string{"POOLRUN_JOB=from-outside", "POOLRUN_ITEM_OUTER=/outer/item", "POOLRUN_SOMETHING=else"}
			code, out := runIn(t, dir, env, append(append([]string{poolrunBin, "run", "--quiet"}, mode...), "wf.yaml")...)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, out)
			}
			data, err := os.ReadFile(filepath.Join(dir, "fds.txt"))
			if err != nil {
				t.Fatal(err)
			}
			// Descriptors that this test process inherited without
			// close-on-exec from whatever started it pass to every child,
			// poolrun first: they are the environment's, not poolrun's.
			outside, err := proctest.InheritedFDs()
			if err != nil {
				t.Fatal(err)
			}
			var fds []string
			for _, l := range strings.Split(string(data), "\n") {
				if link, target, ok := strings.Cut(l, " -> "); ok {
					f := strings.Fields(link)
					if fd, _ := strconv.Atoi(f[len(f)-1]); fd <= 2 || outside[fd] != target {
						fds = append(fds, f[len(f)-1])
					}
				}
			}
			if strings.Join(fds, " ") != "0 1 2" {
				t.Errorf("the command holds descriptors %v, want 0 1 2 (besides %v, inherited by this test):\n%s", fds, outside, data)
			}
			data, err = os.ReadFile(filepath.Join(dir, "env.txt"))
			if err != nil {
				t.Fatal(err)
			}
			job := false
			for _, l := range strings.Split(string(data), "\n") {
				switch {
				case l == "POOLRUN_JOB=outer":
					job = true
				case strings.HasPrefix(l, "POOLRUN_OWNER="):
					// The mark of poolrun's own commands (execflow.OwnerEnv).
				case l == "POOLRUN_THREADS=1", l == "POOLRUN_ATTEMPT=1":
					// The job's own, as POOLRUN_JOB is.
				case strings.HasPrefix(l, "POOLRUN_"):
					t.Errorf("the command inherited %s", l)
				}
			}
			if !job {
				t.Error("the command has no POOLRUN_JOB=outer")
			}
			if got, err := os.ReadFile(filepath.Join(dir, "inner.txt")); err != nil || string(got) != "inner\n" {
				t.Errorf("the poolrun started by the command: inner.txt %q, %v", got, err)
			}
		})
	}
}

// TestBenchTempFolderSwept kills poolrun bench with SIGKILL while it runs:
// its temporary output folder, which it cannot remove then, is private and
// is removed by the next poolrun's sweep.
func TestBenchTempFolderSwept(t *testing.T) {
	dir, tmp := t.TempDir(), t.TempDir()
	env := []string{"TMPDIR=" + tmp}
	cmd, out := startPoolrun(t, dir, env, "bench", "--quiet", "-j", "1", "--modes", "all", "--scale", tinyScale, "--repeat", "1000")
	pattern := filepath.Join(tmp, fmt.Sprintf("poolrun-%d-bench-*", cmd.Process.Pid))
	// Wait until bench writes its outputs there: the folder is complete
	// (a folder is made, then marked as poolrun's; only a marked one is
	// swept).
	var folders []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("no folder %s with outputs after a minute:\n%s", pattern, out)
		}
		time.Sleep(10 * time.Millisecond)
		folders, _ = filepath.Glob(pattern)
		if len(folders) > 0 {
			if entries, _ := os.ReadDir(folders[0]); len(entries) >= 2 {
				break
			}
		}
	}
	fi, err := os.Lstat(folders[0])
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("bench's temporary folder: %v, %v; want a folder with mode 0700", fi, err)
	}
	workers := proctest.Children(cmd.Process.Pid)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	// Its workers go too (they stop when their parent dies); only then is
	// nothing writing into the folder.
	if left := proctest.WaitGone(workers, 10*time.Second); len(left) > 0 {
		t.Fatalf("bench's workers %v outlived it", left)
	}
	if _, err := os.Lstat(folders[0]); err != nil {
		t.Fatalf("the killed bench's folder is gone before any sweep: %v", err)
	}

	os.WriteFile(filepath.Join(dir, "ok.yaml"), []byte(okFlow), 0o644)
	if code, out := runIn(t, dir, env, poolrunBin, "run", "--quiet", "ok.yaml"); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, out)
	}
	if _, err := os.Lstat(folders[0]); err == nil {
		t.Errorf("the killed bench's folder %s outlived the next run", folders[0])
	}
}
