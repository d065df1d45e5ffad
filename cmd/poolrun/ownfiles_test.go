//go:build linux

package main_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/proctest"
)

// The tests of this file are repros of issue 33 ("Nothing lost, part
// two"), run with the real binary: the files poolrun writes where it is
// told to, the files it reads, and the join file.

// ownFilesFlow is a workflow whose job leaves a trace (ran) and has an
// output, so that a run writes a state file.
const ownFilesFlow = "jobs:\n  - id: a\n    run: touch ran; echo x > a.out\n    outputs: [a.out]\n"

// fileID is what a test keeps of a file to tell that it is as it was: its
// type, inode and content.
type fileID struct {
	mode os.FileMode
	ino  uint64
	data string
}

func idOf(t *testing.T, path string) fileID {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	id := fileID{mode: fi.Mode(), ino: fi.Sys().(*syscall.Stat_t).Ino}
	if fi.Mode().IsRegular() {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		id.data = string(data)
	}
	return id
}

// TestOwnFilesRefused: --report, --join-file and report -o that name
// anything but a regular file of poolrun's own (a device, a FIFO, a
// symbolic link, the workflow file under another spelling or a hard link,
// its state and lock files, the report read, the other file poolrun
// writes) are refused with exit status 2 and a message that names the
// flag and the path and says what it is, before any job runs; the file
// named, the workflow and its state file are as they were.
func TestOwnFilesRefused(t *testing.T) {
	t.Parallel()
	root := os.Geteuid() == 0
	listen := []string{"--listen", "127.0.0.1:0"}
	for _, tt := range []struct {
		name   string
		root   bool     // needs root (mknod)
		args   []string // the command and its flags; run's get the workflow file after them
		target string   // the file named, relative to the folder
		want   string   // in standard error
	}{
		{"report on a device", true, []string{"run", "--report", "null"}, "null",
			"poolrun: --report null: is a device, not a regular file"},
		{"report on a FIFO", false, []string{"run", "--report", "r.fifo"}, "r.fifo",
			"poolrun: --report r.fifo: is a named pipe (FIFO), not a regular file"},
		{"report on a link to a device", true, []string{"run", "--report", "null-link"}, "null-link",
			"poolrun: --report null-link: is a symbolic link, not a regular file"},
		{"report on the workflow", false, []string{"run", "--report", "wf.yaml"}, "wf.yaml",
			"poolrun: --report wf.yaml: that is the workflow file, which poolrun must not replace"},
		{"report on ./wf.yaml", false, []string{"run", "--report", "./wf.yaml"}, "wf.yaml",
			"poolrun: --report ./wf.yaml: that is the workflow file"},
		{"report on the workflow through a linked folder", false, []string{"run", "--report", "here/wf.yaml"}, "wf.yaml",
			"poolrun: --report here/wf.yaml: that is the workflow file (wf.yaml)"},
		{"report on a hard link to the workflow", false, []string{"run", "--report", "hard.json"}, "hard.json",
			"poolrun: --report hard.json: that is the workflow file (wf.yaml)"},
		{"report on the state file", false, []string{"run", "--report", ".wf.yaml.poolrun-state"}, ".wf.yaml.poolrun-state",
			"poolrun: --report .wf.yaml.poolrun-state: that is the state file of wf.yaml"},
		{"report on a hard link to the state file", false, []string{"run", "--report", "state.json"}, "state.json",
			"poolrun: --report state.json: that is the state file of wf.yaml (.wf.yaml.poolrun-state)"},
		{"report on the lock file", false, []string{"run", "--report", ".wf.yaml.poolrun-lock"}, "",
			"poolrun: --report .wf.yaml.poolrun-lock: that is the lock file of wf.yaml"},
		{"join file on a device", true, append([]string{"run", "--join-file", "null"}, listen...), "null",
			"poolrun: --join-file null: is a device, not a regular file"},
		{"join file on the workflow", false, append([]string{"run", "--join-file", "./wf.yaml"}, listen...), "wf.yaml",
			"poolrun: --join-file ./wf.yaml: that is the workflow file"},
		{"join file on the state file", false, append([]string{"run", "--join-file", "state.json"}, listen...), "state.json",
			"poolrun: --join-file state.json: that is the state file of wf.yaml"},
		{"join file on the report", false, append([]string{"run", "--join-file", "r.json", "--report", "./r.json"}, listen...), "r.json",
			"poolrun: --join-file r.json: that is the --report"},
		{"page on a device", true, []string{"report", "-o", "null", "r.json"}, "null",
			"poolrun report: -o null: is a device, not a regular file"},
		{"page on a FIFO", false, []string{"report", "-o", "r.fifo", "r.json"}, "r.fifo",
			"poolrun report: -o r.fifo: is a named pipe (FIFO), not a regular file"},
		{"page on the report", false, []string{"report", "-o", "./r.json", "r.json"}, "r.json",
			"poolrun report: -o ./r.json: that is the report itself"},
		{"page on a hard link to the report", false, []string{"report", "-o", "hard-r.json", "r.json"}, "hard-r.json",
			"poolrun report: -o hard-r.json: that is the report itself (r.json)"},
		{"page on a state file", false, []string{"report", "-o", ".wf.yaml.poolrun-state", "r.json"}, ".wf.yaml.poolrun-state",
			"poolrun report: -o .wf.yaml.poolrun-state: that is the state file of wf.yaml"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && !root {
				t.Skip("mknod needs root")
			}
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"wf.yaml": ownFilesFlow})
			mustRun(t, dir, "run", "--quiet", "--report", "r.json", "wf.yaml") // the state file, and a report
			path := func(name string) string { return filepath.Join(dir, name) }
			os.Remove(path("ran"))
			mkfifo(t, path("r.fifo"))
			for _, l := range [][2]string{{"wf.yaml", "hard.json"}, {".wf.yaml.poolrun-state", "state.json"}, {"r.json", "hard-r.json"}} {
				if err := os.Link(path(l[0]), path(l[1])); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(".", path("here")); err != nil {
				t.Fatal(err)
			}
			if tt.root {
				// The device of /dev/null, made here: a regression
				// replaces this one, not the system's.
				if err := syscall.Mknod(path("null"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
					t.Skip("no device can be made here:", err)
				}
				os.Symlink("null", path("null-link"))
			}
			kept := []string{"wf.yaml", ".wf.yaml.poolrun-state", "r.json"}
			if tt.target != "" {
				kept = append(kept, tt.target)
			}
			before := map[string]fileID{}
			for _, name := range kept {
				before[name] = idOf(t, path(name))
			}

			args := tt.args
			if args[0] == "run" {
				args = append(args[:len(args):len(args)], "wf.yaml")
			}
			r := poolrunWithin(t, dir, oddTimeout, nil, args...)
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("poolrun %q: exit %d, stderr:\n%s\nwant exit 2 and %q", args, r.code, r.stderr, tt.want)
			}
			if _, err := os.Stat(path("ran")); err == nil {
				t.Error("the job ran")
			}
			for _, name := range kept {
				if after := idOf(t, path(name)); after != before[name] {
					t.Errorf("%s was replaced or changed: %v, inode %d, %d bytes; was %v, inode %d, %d bytes",
						name, after.mode, after.ino, len(after.data), before[name].mode, before[name].ino, len(before[name].data))
				}
			}
			if _, err := os.Lstat(path(".wf.yaml.poolrun-lock")); err == nil {
				t.Error("a lock file is left")
			}
		})
	}
}

// TestReportRelativeToC: with -C DIR, --report is relative to DIR, and
// checked there before anything runs, as written at the end.
func TestReportRelativeToC(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"sub/wf.yaml": ownFilesFlow, "sub/reports/.keep": "", "elsewhere/reports/.keep": ""})
	mustRun(t, filepath.Join(dir, "elsewhere"), "run", "--quiet", "-C", "../sub", "--report", "reports/r.json", "wf.yaml")
	if _, err := os.Stat(filepath.Join(dir, "sub/reports/r.json")); err != nil {
		t.Errorf("no report in DIR's reports folder: %v", err)
	}
	// No folder for it in DIR: refused, though the current folder has one.
	os.RemoveAll(filepath.Join(dir, "sub/reports"))
	os.Remove(filepath.Join(dir, "sub/ran"))
	r := poolrun(t, filepath.Join(dir, "elsewhere"), "run", "--quiet", "-C", "../sub", "--force", "--report", "reports/r.json", "wf.yaml")
	if r.code != 2 || !strings.Contains(r.stderr, "poolrun: --report reports/r.json: no folder reports") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and the report refused", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub/ran")); err == nil {
		t.Error("the job ran")
	}
}

// TestForceAlone: --force without a pattern runs every job, those whose
// ids have a / in them too (which the glob * does not match), even when
// every id has one.
func TestForceAlone(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.yaml": `jobs:
  - id: data/a
    run: echo a >> a.log; touch a.out
    outputs: [a.out]
  - id: data/b
    run: echo b >> b.log; touch b.out
    outputs: [b.out]
`})
	mustRun(t, dir, "run", "--quiet", "wf.yaml")
	r := mustRun(t, dir, "run", "-n", "--force", "wf.yaml")
	for _, id := range []string{"data/a", "data/b"} {
		if want := "run  " + id + "  forced"; !strings.Contains(r.stdout, want) {
			t.Errorf("-n --force:\n%s\nwant %q", r.stdout, want)
		}
	}
	mustRun(t, dir, "run", "--quiet", "--force", "wf.yaml")
	for _, f := range []string{"a.log", "b.log"} {
		if data, _ := os.ReadFile(filepath.Join(dir, f)); strings.Count(string(data), "\n") != 2 {
			t.Errorf("%s holds %q: its job did not run again under --force", f, data)
		}
	}
}

// TestWorkerRefusesOthersJoinFile: a worker run as root refuses a join
// file that another user owns (uid 65534, nobody, here), which could send
// it that user's commands to run as root: it exits with an error that
// names the file and its owner, and runs nothing. Once the file is root's
// again, the same worker joins and runs the job.
func TestWorkerRefusesOthersJoinFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another user needs root")
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.yaml": "jobs:\n  - id: a\n    run: touch ran\n"})
	joinFile := filepath.Join(dir, "run.join")
	pool, out := startPoolrun(t, dir, nil, "run", "--quiet", "-j", "0", "--listen", "127.0.0.1:0", "--join-file", "run.join", "wf.yaml")
	waitJoinFile(t, joinFile, out)
	if err := os.Chown(joinFile, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	r := poolrun(t, dir, "worker", "--join-file", joinFile, "-j", "1")
	if want := "join file " + joinFile + " is owned by uid 65534, not by this process's user (uid 0)"; r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("worker with another user's join file: exit %d, stderr:\n%s\nwant a failure and %q", r.code, r.stderr, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the job ran through another user's join file")
	}

	if err := os.Chown(joinFile, 0, 0); err != nil {
		t.Fatal(err)
	}
	if r := poolrun(t, dir, "worker", "--join-file", joinFile, "-j", "1"); r.code != 0 {
		t.Errorf("worker with root's join file: exit %d\n%s", r.code, r.stderr)
	}
	if err := pool.Wait(); err != nil {
		t.Fatalf("the pool: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err != nil {
		t.Errorf("the job did not run once the join file was root's: %v", err)
	}
}

// TestReportGarbageRefused: poolrun report of a large file that is not a
// report (sparse: zeros, or the start of a report and then zeros) is
// refused at once from its first bytes, with exit status 2 and a message
// that says so: its resident memory stays far below the file's size.
func TestReportGarbageRefused(t *testing.T) {
	const size = 320 << 20
	for _, tt := range []struct{ name, head string }{
		{"zeros", ""},
		{"a report's start", `{"version": 2, "command": "run", "workers": `},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "big.json")
			if err := os.WriteFile(path, []byte(tt.head), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, size); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			r := poolrunWithin(t, dir, oddTimeout, nil, "report", "big.json")
			t.Logf("refused in %v, resident at most %d MiB", time.Since(start).Round(time.Millisecond), r.maxRSS>>20)
			if want := "poolrun report: big.json: not a poolrun report: line 1: invalid character '\\x00'"; r.code != 2 || !strings.Contains(r.stderr, want) {
				t.Errorf("exit %d, stderr %q; want exit 2 and %q", r.code, r.stderr, want)
			}
			if r.maxRSS == 0 || r.maxRSS > size/4 {
				t.Errorf("resident memory %d bytes (0: unknown) to refuse a file of %d: it read the file", r.maxRSS, size)
			}
			if _, err := os.Stat(filepath.Join(dir, "big.html")); err == nil {
				t.Error("a page was written")
			}
		})
	}
}

// TestKilledListenPoolLeavesNoFiles: poolrun run --listen killed with
// SIGKILL, with no local worker (-j 0, its job waiting for one) and with
// one that runs the job, leaves neither its join file nor its lock file:
// its janitor removes them.
func TestKilledListenPoolLeavesNoFiles(t *testing.T) {
	for _, jobs := range []string{"0", "1"} {
		t.Run("-j "+jobs, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"wf.yaml": "jobs:\n  - id: long\n    run: touch started; while [ ! -e go ]; do sleep 0.05; done\n"})
			t.Cleanup(func() { os.WriteFile(filepath.Join(dir, "go"), nil, 0o644) }) // should the command be left
			joinFile := filepath.Join(dir, "run.join")
			lockFile := filepath.Join(dir, ".wf.yaml.poolrun-lock")
			cmd, out := startRun(t, dir, "--quiet", "-j", jobs, "--listen", "127.0.0.1:0", "--join-file", "run.join", "wf.yaml")
			waitFor(t, "the join file and the lock file", out, func() bool {
				_, jerr := os.Stat(joinFile)
				_, lerr := os.Stat(lockFile)
				return jerr == nil && lerr == nil
			})
			if jobs != "0" {
				waitFor(t, "the job started", out, func() bool {
					_, err := os.Stat(filepath.Join(dir, "started"))
					return err == nil
				})
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			waitFor(t, "the killed pool's join file and lock file are removed", out, func() bool {
				_, jerr := os.Lstat(joinFile)
				_, lerr := os.Lstat(lockFile)
				return errors.Is(jerr, os.ErrNotExist) && errors.Is(lerr, os.ErrNotExist)
			})
		})
	}
}

// TestJoinFileOfLivePoolRefused: a pool whose --join-file is that of a
// pool that runs is refused with exit status 2 before any job runs; the
// running pool's join file is left as it was, and a worker joins through
// it.
func TestJoinFileOfLivePoolRefused(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a/wf.yaml": "jobs:\n  - id: a\n    run: touch ran\n",
		"b/wf.yaml": "jobs:\n  - id: b\n    run: touch ran\n",
	})
	joinFile := filepath.Join(dir, "run.join")
	first, out := startRun(t, filepath.Join(dir, "a"), "--quiet", "-j", "0", "--listen", "127.0.0.1:0", "--join-file", joinFile, "wf.yaml")
	waitFor(t, "the first pool's join file", out, func() bool {
		_, err := os.Stat(joinFile)
		return err == nil
	})
	before := idOf(t, joinFile)
	r := poolrun(t, filepath.Join(dir, "b"), "run", "--quiet", "-j", "0", "--listen", "127.0.0.1:0", "--join-file", joinFile, "wf.yaml")
	if want := "join file " + joinFile + ": another pool that runs now holds it"; r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Errorf("the second pool: exit %d, stderr:\n%s\nwant exit 2 and %q", r.code, r.stderr, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "b", "ran")); err == nil {
		t.Error("the second pool's job ran")
	}
	if after := idOf(t, joinFile); after != before {
		t.Fatalf("the first pool's join file was replaced or changed")
	}
	if r := poolrun(t, dir, "worker", "--join-file", joinFile, "-j", "1"); r.code != 0 {
		t.Errorf("a worker through the first pool's join file: exit %d\n%s", r.code, r.stderr)
	}
	if err := first.Wait(); err != nil {
		t.Fatalf("the first pool: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "a", "ran")); err != nil {
		t.Errorf("the first pool's job did not run: %v", err)
	}
}

// TestJanitorSparesHeldJoinFile: the janitor of a killed --listen pool
// leaves a join file at the pool's path that someone holds a flock(2) of
// (a pool that wrote its own there since: here the test, as such a pool
// does), and does the rest of its work.
func TestJanitorSparesHeldJoinFile(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.yaml": "jobs:\n  - id: a\n    run: touch ran\n"})
	joinFile := filepath.Join(dir, "run.join")
	pool, out := startRun(t, dir, "--quiet", "-j", "0", "--listen", "127.0.0.1:0", "--join-file", joinFile, "wf.yaml")
	var janitor int
	waitFor(t, "the pool's join file and janitor", out, func() bool {
		if _, err := os.Stat(joinFile); err != nil {
			return false
		}
		for _, c := range proctest.Children(pool.Process.Pid) {
			if slices.ContainsFunc(proctest.Environ(c), func(e string) bool { return strings.HasPrefix(e, execflow.JanitorEnv+"=") }) {
				janitor = c
				return true
			}
		}
		return false
	})
	// Another join file in its place, held as a running pool holds its.
	other := filepath.Join(dir, "other.join")
	if err := os.WriteFile(other, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	held, err := os.Open(other)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := syscall.Flock(int(held.Fd()), syscall.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, joinFile); err != nil {
		t.Fatal(err)
	}
	want := idOf(t, joinFile)

	pool.Process.Signal(syscall.SIGKILL)
	pool.Wait()
	if left := proctest.WaitGone([]int{janitor}, time.Minute); len(left) > 0 {
		t.Fatalf("the killed pool's janitor (pid %d) is there a minute on", janitor)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".wf.yaml.poolrun-lock")); err == nil {
		t.Error("the janitor left the lock file: it did not do its work")
	}
	if _, err := os.Lstat(joinFile); err != nil || idOf(t, joinFile) != want {
		t.Errorf("the held join file, after the janitor: %v; want it as it was", err)
	}
}

// TestKilledSerialRunLeavesNothing: poolrun run -j 0 (serial, as
// --serial: its commands run in poolrun's process) killed with SIGKILL
// under a command has a janitor too: the command's child (the sleep of
// "sleep N; echo hi", which the shell's parent-death signal does not
// reach) is killed, and the lock file removed.
func TestKilledSerialRunLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	arg := uniqueArg(60)
	killAll(t, "sleep", arg)
	writeFiles(t, dir, map[string]string{"wf.yaml": "jobs:\n  - id: long\n    run: sleep " + arg + "; echo hi\n"})
	cmd, out := startRun(t, dir, "--quiet", "-j", "0", "wf.yaml")
	waitProcs(t, "sleep", arg)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	waitFor(t, "the command's child is killed and the lock file removed", out, func() bool {
		_, err := os.Lstat(filepath.Join(dir, ".wf.yaml.poolrun-lock"))
		return len(procsWithArgs("sleep", arg)) == 0 && errors.Is(err, os.ErrNotExist)
	})
}
