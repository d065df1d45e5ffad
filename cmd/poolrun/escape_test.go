package main_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolrun/poolrun/internal/proctest"
)

// Issue 33's smaller items: a process that a command starts in a session
// of its own (setsid) ends with its job, or at the latest with the run;
// a killed janitor is replaced; a workflow reached through a link is the
// same workflow for the lock.

// escapeLimit bounds the wait for a process that poolrun is to end.
const escapeLimit = 30 * time.Second

// daemon returns the shell lines of a command that starts, with setsid,
// a process in a session of its own that writes its pid to the file
// name and becomes sleep arg, then waits (at most a minute) for the
// pid. form is "&" (setsid in the background, its standard streams the
// command's, which it keeps open) or "-f" (setsid -f, its streams
// closed as a daemon's are). The lines are indented for a "run: |".
func daemon(form, name, arg string) string {
	own := fmt.Sprintf(`sh -c 'echo $$ > %[1]s.tmp; mv %[1]s.tmp %[1]s; exec sleep %[2]s'`, name, arg)
	start := "setsid " + own + " &"
	if form == "-f" {
		start = "setsid -f " + own + " </dev/null >/dev/null 2>&1"
	}
	return "      " + start + fmt.Sprintf(`
      i=0; until [ -e %[1]s ]; do i=$((i+1)); [ $i -lt 6000 ] || { echo "no %[1]s" >&2; exit 1; }; sleep 0.01; done
`, name)
}

// holdJob is the command of a job that tells it runs (the file holding)
// and waits, at most a minute, for the file release.
const holdJob = `touch holding; i=0; until [ -e release ]; do i=$((i+1)); [ $i -lt 6000 ] || exit 1; sleep 0.01; done`

// watchPID returns a pidfd of the process whose pid the file name in dir
// holds, or -1 when that process is gone already.
func watchPID(t *testing.T, dir, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %q", name, b)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// gone waits up to escapeLimit for the process of pidfd fd (-1: gone
// already) to exit, and reports whether it did.
func gone(t *testing.T, fd int) bool {
	t.Helper()
	return fd < 0 || exited(t, fd, escapeLimit)
}

// TestEscapedEndWithTheirJob: a process that a job's command started with
// setsid is killed when the command ends, while the run goes on: when it
// exits, and when it is stopped at its timeout.
func TestEscapedEndWithTheirJob(t *testing.T) {
	for _, c := range []struct {
		name string
		wf   func(arg string) string
		args []string
		code int
	}{
		{"exit", func(arg string) string {
			return "jobs:\n  - id: daemon\n    run: |\n" + daemon("-f", "daemon.pid", arg) +
				"  - id: hold\n    after: [daemon]\n    run: " + holdJob + "\n"
		}, nil, 0},
		{"timeout", func(arg string) string {
			return "jobs:\n  - id: daemon\n    timeout: 500ms\n    run: |\n" + daemon("&", "daemon.pid", arg) + "      sleep 300\n" +
				"  - id: hold\n    run: " + holdJob + "\n"
		}, []string{"-j", "2"}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			arg := uniqueArg(300)
			killAll(t, "sleep", arg)
			writeFiles(t, dir, map[string]string{"wf.yaml": c.wf(arg)})
			cmd, out := startRun(t, dir, append(append([]string{"--quiet"}, c.args...), "wf.yaml")...)
			waitFor(t, "the daemon's pid, and the job hold", out, func() bool {
				_, err := os.Stat(filepath.Join(dir, "holding"))
				_, perr := os.Stat(filepath.Join(dir, "daemon.pid"))
				return err == nil && perr == nil
			})
			if !gone(t, watchPID(t, dir, "daemon.pid")) {
				t.Errorf("the daemon of job daemon (sleep %s) runs on %v after its job ended, while the run goes on", arg, escapeLimit)
			}
			if !proctest.Alive(cmd.Process.Pid) {
				t.Fatalf("the run ended before the job hold was released: the test proves nothing\n%s", out)
			}
			writeFiles(t, dir, map[string]string{"release": ""})
			cmd.Wait()
			if code := cmd.ProcessState.ExitCode(); code != c.code {
				t.Errorf("exit %d, want %d:\n%s", code, c.code, out)
			}
		})
	}
}

// TestEscapedEndWithTheRun: what commands started with setsid is killed
// by the end of the run, when it ends as the commands end (two of them at
// once: the second's look through /proc may wait, and the run's end does
// it), and when it is interrupted (Ctrl-C, SIGINT).
func TestEscapedEndWithTheRun(t *testing.T) {
	for _, c := range []struct {
		name  string
		after string // the commands' last line
	}{
		{"exit", ""},
		{"interrupt", "      sleep 300\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			a, b := uniqueArg(300), uniqueArg(300)
			killAll(t, "sleep", a)
			killAll(t, "sleep", b)
			writeFiles(t, dir, map[string]string{"wf.yaml": "jobs:\n" +
				"  - id: bg\n    run: |\n" + daemon("&", "a.pid", a) + c.after +
				"  - id: fork\n    run: |\n" + daemon("-f", "b.pid", b) + c.after})
			cmd, out := startRun(t, dir, "--quiet", "-j", "2", "wf.yaml")
			waitFor(t, "the daemons' pids", out, func() bool {
				_, aerr := os.Stat(filepath.Join(dir, "a.pid"))
				_, berr := os.Stat(filepath.Join(dir, "b.pid"))
				return aerr == nil && berr == nil
			})
			fds := []int{watchPID(t, dir, "a.pid"), watchPID(t, dir, "b.pid")}
			want := 0
			if c.after != "" {
				cmd.Process.Signal(syscall.SIGINT)
				want = 130
			}
			cmd.Wait()
			if code := cmd.ProcessState.ExitCode(); code != want {
				t.Errorf("exit %d, want %d:\n%s", code, want, out)
			}
			for i, arg := range []string{a, b} {
				if !gone(t, fds[i]) {
					t.Errorf("the daemon sleep %s runs on %v after the run ended", arg, escapeLimit)
				}
			}
		})
	}
}

// TestJanitorReplaced: poolrun run whose janitor is killed starts another
// at once and says so; killed with SIGKILL afterwards, it leaves nothing
// running: the new janitor kills its command's child (which the shell's
// parent-death signal does not reach) and its daemon.
func TestJanitorReplaced(t *testing.T) {
	dir := t.TempDir()
	arg, d := uniqueArg(300), uniqueArg(300)
	killAll(t, "sleep", arg)
	killAll(t, "sleep", d)
	writeFiles(t, dir, map[string]string{"wf.yaml": "jobs:\n  - id: long\n    run: |\n" +
		daemon("-f", "d.pid", d) + "      sleep " + arg + "; echo hi\n"})
	cmd, out := startRun(t, dir, "--quiet", "wf.yaml")
	waitFor(t, "the command's sleep and daemon", out, func() bool {
		_, err := os.Stat(filepath.Join(dir, "d.pid"))
		return err == nil && len(procsWithArgs("sleep", arg)) > 0
	})
	sleep, err := unix.PidfdOpen(procsWithArgs("sleep", arg)[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sleep)
	daemonFD := watchPID(t, dir, "d.pid")

	first := janitorOf(t, cmd.Process.Pid)
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	said := fmt.Sprintf("poolrun: the janitor (pid %d) ended (signal: killed); started another (pid ", first)
	waitFor(t, "poolrun says it replaced its janitor", out, func() bool { return strings.Contains(out.String(), said) })
	second := janitorOf(t, cmd.Process.Pid)
	if second == first || !strings.Contains(out.String(), fmt.Sprintf("%s%d)\n", said, second)) {
		t.Fatalf("poolrun's janitor is %d (the killed one %d); poolrun said:\n%s", second, first, out)
	}
	janitor, err := unix.PidfdOpen(second, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(janitor)

	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	for _, p := range []struct {
		what string
		fd   int
	}{{"the command's sleep", sleep}, {"its daemon", daemonFD}, {"the new janitor", janitor}} {
		if !gone(t, p.fd) {
			t.Errorf("%s runs on %v after poolrun was killed", p.what, escapeLimit)
		}
	}
}

// TestOneRunThroughLinks: while a run of wf.yaml runs, a run of the same
// file through a symbolic link, and through a hard link, is refused as a
// second run of wf.yaml is, naming the first, and leaves no lock file.
func TestOneRunThroughLinks(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.yaml": `jobs:
  - id: slow
    run: |
      if [ -e started ]; then echo again >> ran.log; exit 0; fi
      touch started; i=0; until [ -e go ]; do i=$((i+1)); [ $i -lt 6000 ] || exit 1; sleep 0.01; done
      echo first >> ran.log
`})
	if err := os.Symlink("wf.yaml", filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "wf.yaml"), filepath.Join(dir, "hard.yaml")); err != nil {
		t.Fatal(err)
	}
	first, out := startRun(t, dir, "--quiet", "wf.yaml")
	waitFor(t, "the first run's job started", out, func() bool {
		_, err := os.Stat(filepath.Join(dir, "started"))
		return err == nil
	})
	for _, name := range []string{"link.yaml", "hard.yaml"} {
		r := poolrun(t, dir, "run", "--quiet", name)
		want := fmt.Sprintf("poolrun run: %s is being run by another poolrun (pid %d): wait for it to end, or give --wait", name, first.Process.Pid)
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("a run through %s: exit %d, stderr:\n%s\nwant exit 1 and %q", name, r.code, r.stderr, want)
		}
		if _, err := os.Lstat(filepath.Join(dir, "."+name+".poolrun-lock")); err == nil {
			t.Errorf("the refused run through %s left its lock file", name)
		}
	}
	writeFiles(t, dir, map[string]string{"go": ""})
	if err := first.Wait(); err != nil {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "ran.log")); string(b) != "first\n" {
		t.Errorf("ran.log: %q, want the first run's job alone", b)
	}
}
