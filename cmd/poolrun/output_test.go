package main_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// printFlow has two jobs, alpha and beta, that print at once 2,000 lines
// each on standard output and on standard error ("alpha 1", ...), each
// line in two writes.
const printFlow = `jobs:
  - id: ${j}
    foreach: {j: [alpha, beta]}
    run: |
      for i in $(seq 1 2000); do printf '${j} '; printf '%d\n' $i; printf '${j} ' >&2; printf '%d\n' $i >&2; done
`

// printed is what a job of printFlow prints on either stream.
func printed(job string) string {
	var b strings.Builder
	for i := 1; i <= 2000; i++ {
		fmt.Fprintf(&b, "%s %d\n", job, i)
	}
	return b.String()
}

// checkPrinted checks that text holds, among lines that match other (if
// not nil), the lines of both jobs of printFlow, whole, in order, and
// tagged with their job's id if tagged; it returns how many times the
// lines switch from one job to the other.
func checkPrinted(t *testing.T, what, text string, tagged bool, other *regexp.Regexp) int {
	t.Helper()
	byJob := map[string][]string{}
	switches, last := 0, ""
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if other != nil && other.MatchString(line) {
			continue
		}
		job, rest, _ := strings.Cut(line, " ")
		if tagged {
			tag := job
			job, rest, _ = strings.Cut(rest, " ")
			if tag != "["+job+"]" {
				t.Fatalf("%s: line %q is not tagged with its job", what, line)
			}
		}
		if job != "alpha" && job != "beta" || strings.Trim(rest, "0123456789") != "" || rest == "" {
			t.Fatalf("%s: line %q is not whole", what, line)
		}
		byJob[job] = append(byJob[job], job+" "+rest+"\n")
		if job != last {
			switches++
			last = job
		}
	}
	for _, job := range []string{"alpha", "beta"} {
		if got := strings.Join(byJob[job], ""); got != printed(job) {
			t.Errorf("%s: %d lines of %s, want 2000 in order", what, len(byJob[job]), job)
		}
	}
	return switches
}

// TestRunOutputWholeLines runs two jobs that print at once on two
// workers: their lines reach poolrun's standard output and error whole,
// tagged with --tag, untagged by default off a terminal.
func TestRunOutputWholeLines(t *testing.T) {
	for _, tt := range []struct {
		name   string
		args   []string
		tagged bool
	}{
		{"tag", []string{"--tag"}, true},
		{"default", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(printFlow), 0o644)
			r := poolrun(t, dir, append(append([]string{"run", "-j", "2", "--quiet"}, tt.args...), "wf.yaml")...)
			if r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			n := checkPrinted(t, "stdout", r.stdout, tt.tagged, nil)
			checkPrinted(t, "stderr", r.stderr, tt.tagged, nil)
			t.Logf("stdout switches from one job's lines to the other's %d times", n)
		})
	}
}

// TestRunLogDir runs the two jobs with --log-dir, under umask 027: each
// job's standard output and error are in files of their own, mode 0640,
// in the folder made for them; nothing of theirs is printed, and the
// run's last line says where the files are.
func TestRunLogDir(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(printFlow), 0o644)
	code, out := runIn(t, dir, nil, inUmask("027", "run", "-j", "2", "--tag", "--log-dir", "out/logs", "wf.yaml")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	logs := filepath.Join(dir, "out", "logs")
	if !strings.Contains(out, "logs: "+logs+" ") {
		t.Errorf("the output does not say where the logs are:\n%s", out)
	}
	if strings.Contains(out, "alpha 1\n") || strings.Contains(out, "beta 1\n") {
		t.Errorf("the commands' output was printed:\n%.2000s", out)
	}
	for _, job := range []string{"alpha", "beta"} {
		for _, ext := range []string{".out", ".err"} {
			path := filepath.Join(logs, job+ext)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Error(err)
				continue
			}
			if string(data) != printed(job) {
				t.Errorf("%s: %d bytes, want the %d its job printed", path, len(data), len(printed(job)))
			}
			checkMode(t, path, 0o640)
		}
	}
	if entries, _ := os.ReadDir(logs); len(entries) != 4 {
		t.Errorf("%s holds %d files, want 4", logs, len(entries))
	}
}

// openPty opens a pseudo-terminal of 40 rows of 120 columns and returns
// its two sides.
func openPty(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skip("no pseudo-terminal:", err)
	}
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 120}); err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	return m, s
}

// runOnTerminal runs poolrun in dir with args, its standard error on a
// pseudo-terminal, and its standard output there too if both, else in a
// pipe; it returns its exit status, what it wrote to the pipe, and what
// the terminal showed, with carriage returns and the terminal's escape
// sequences removed.
func runOnTerminal(t *testing.T, dir string, both bool, args ...string) (int, string, string) {
	t.Helper()
	master, tty := openPty(t)
	defer master.Close()
	cmd := exec.Command(poolrunBin, args...)
	cmd.Dir = dir
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, tty
	if both {
		cmd.Stdout = tty
	}
	err := cmd.Start()
	tty.Close()
	if err != nil {
		t.Fatal(err)
	}
	var screen bytes.Buffer
	read := make(chan struct{})
	go func() { io.Copy(&screen, master); close(read) }() // ends with EIO once poolrun has gone
	cmd.Wait()
	<-read
	clean := regexp.MustCompile("\x1b\\[[0-9;?]*[A-Za-z]|\r").ReplaceAllString(screen.String(), "")
	return cmd.ProcessState.ExitCode(), stdout.String(), clean
}

// barLine matches what poolrun itself shows on a terminal: the progress
// bar and the summary at the end.
var barLine = regexp.MustCompile(`^(jobs |\d+ jobs?: |slowest: |$)`)

// TestRunOutputOnTerminal runs the two jobs with standard error on a
// terminal: --tag is on by default with two workers, off with one, with
// --tag=false, and with standard error on /dev/null; with standard output
// on the terminal too, the lines are printed whole above the progress
// bar.
func TestRunOutputOnTerminal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(printFlow), 0o644)
	for _, tt := range []struct {
		name   string
		args   []string
		tagged bool
	}{
		{"two workers", []string{"-j", "2"}, true},
		{"one worker", []string{"-j", "1"}, false},
		{"tag=false", []string{"-j", "2", "--tag=false"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, screen := runOnTerminal(t, dir, false, append(append([]string{"run"}, tt.args...), "wf.yaml")...)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, screen)
			}
			checkPrinted(t, "stdout", stdout, tt.tagged, barLine)
			checkPrinted(t, "the terminal", screen, tt.tagged, barLine)
		})
	}
	t.Run("stderr to /dev/null", func(t *testing.T) {
		// A character device, but no terminal: no tags by default.
		null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer null.Close()
		cmd := exec.Command(poolrunBin, "run", "-j", "2", "wf.yaml")
		cmd.Dir = dir
		var stdout bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, null
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		checkPrinted(t, "stdout", stdout.String(), false, barLine)
	})
	t.Run("stdout on the terminal", func(t *testing.T) {
		code, _, screen := runOnTerminal(t, dir, true, "run", "-j", "2", "wf.yaml")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, screen)
		}
		// Each job printed each line twice, on stdout and on stderr:
		// the first of each goes to one text, the second to the other,
		// and each is in order if the lines came whole.
		var first, second strings.Builder
		seen := map[string]bool{}
		for _, line := range strings.SplitAfter(screen, "\n") {
			switch {
			case barLine.MatchString(line):
			case seen[line]:
				second.WriteString(line)
			default:
				seen[line] = true
				first.WriteString(line)
			}
		}
		checkPrinted(t, "the terminal (first of each)", first.String(), true, nil)
		checkPrinted(t, "the terminal (second of each)", second.String(), true, nil)
		if !strings.Contains(screen, "2 jobs: 2 succeeded") {
			t.Errorf("no summary on the terminal:\n%s", screen)
		}
	})
}
