package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests of this file are the repros of issue 34 ("Workflows") about a
// job's outputs before and after it runs, with the real binary: a job
// starts without its last outputs, in folders that exist; they are dropped
// when it succeeds and put back when it fails, is interrupted or is cut
// off; and a folder output settles.

// A rerun starts from nothing: an appending command appends once.
func TestRerunStartsWithoutLastOutputs(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.yaml": "jobs:\n  - id: log\n    run: echo line >> out.txt\n    outputs: [out.txt]\n"})
	for range 3 {
		mustRun(t, dir, "run", "--force", "wf.yaml")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "out.txt")); string(b) != "line\n" {
		t.Errorf("out.txt after three forced runs: %q, want one line", b)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*.poolrun-aside")); len(left) > 0 {
		t.Errorf("left aside: %v", left)
	}
}

// The folders of a job's outputs are made before its command runs.
func TestOutputFoldersMade(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.yaml": `jobs:
  - id: deep
    run: echo x > out/deep/a.txt
    outputs: [out/deep/a.txt]
  - id: parts
    run: echo 1 > parts/1.txt; echo 2 > parts/2.txt
    outputs: ["parts/*.txt"]
`})
	mustRun(t, dir, "run", "wf.yaml")
	for _, f := range []string{"out/deep/a.txt", "parts/1.txt", "parts/2.txt"} {
		if !exists(filepath.Join(dir, f)) {
			t.Errorf("%s is missing", f)
		}
	}
}

// A job that fails or is interrupted gets its last outputs back as they
// were; what it wrote is removed.
func TestFailedRerunPutsLastOutputsBack(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.yaml": `jobs:
  - id: gen
    run: echo v1 > out.txt; mkdir -p parts; echo v1 > parts/a.txt
    outputs: [out.txt, "parts/*.txt"]
`})
	mustRun(t, dir, "run", "wf.yaml")
	writeFiles(t, dir, map[string]string{"wf.yaml": `jobs:
  - id: gen
    run: echo v2 > out.txt; echo v2 > parts/b.txt; exit 1
    outputs: [out.txt, "parts/*.txt"]
`})
	if r := poolrun(t, dir, "run", "wf.yaml"); r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	for f, want := range map[string]string{"out.txt": "v1\n", "parts/a.txt": "v1\n"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || string(b) != want {
			t.Errorf("%s after the failed rerun: %q, %v; want %q", f, b, err, want)
		}
	}
	if exists(filepath.Join(dir, "parts/b.txt")) {
		t.Error("parts/b.txt, which the failed run wrote, is still there")
	}

	// Interrupted (SIGINT, as Ctrl-C sends it): the same.
	writeFiles(t, dir, map[string]string{"wf.yaml": `jobs:
  - id: gen
    run: 'echo v3 > out.txt; touch started; while :; do sleep 0.05; done'
    outputs: [out.txt, "parts/*.txt"]
`})
	cmd, out := startRun(t, dir, "wf.yaml")
	waitFor(t, "the job to start", out, func() bool { return exists(filepath.Join(dir, "started")) })
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait()
	if b, _ := os.ReadFile(filepath.Join(dir, "out.txt")); string(b) != "v1\n" {
		t.Errorf("out.txt after the interrupted rerun: %q, want v1", b)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*", ".*.poolrun-aside")); len(left) > 0 {
		t.Errorf("left aside: %v", left)
	}
}

// A run cut off (SIGKILL) while a job's last outputs are aside: the next
// run of the job puts them back before it sets them aside again, and
// what the cut-off run half wrote is gone.
func TestCutOffRerunKeepsLastOutputs(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.yaml": "jobs:\n  - id: gen\n    run: echo v1 > out.txt\n    outputs: [out.txt]\n"})
	mustRun(t, dir, "run", "wf.yaml")
	writeFiles(t, dir, map[string]string{"wf.yaml": "jobs:\n  - id: gen\n    run: 'echo half > out.txt; touch started; while [ ! -e go ]; do sleep 0.05; done; cat out.txt.old 2>/dev/null; echo v2 > out.txt'\n    outputs: [out.txt]\n"})
	cmd, out := startRun(t, dir, "wf.yaml")
	waitFor(t, "the job to start", out, func() bool { return exists(filepath.Join(dir, "started")) })
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	waitFor(t, "the killed run's lock file is removed", out, func() bool { return !exists(filepath.Join(dir, ".wf.yaml.poolrun-lock")) })
	if b, _ := os.ReadFile(filepath.Join(dir, ".out.txt.poolrun-aside")); string(b) != "v1\n" {
		t.Fatalf("the last output aside holds %q, want v1", b)
	}
	// The next run is given a command that fails: v1 must come back.
	writeFiles(t, dir, map[string]string{"wf.yaml": "jobs:\n  - id: gen\n    run: echo v3 > out.txt; exit 1\n    outputs: [out.txt]\n"})
	if r := poolrun(t, dir, "run", "wf.yaml"); r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "out.txt")); string(b) != "v1\n" {
		t.Errorf("out.txt: %q, want v1 back", b)
	}
	if exists(filepath.Join(dir, ".out.txt.poolrun-aside")) {
		t.Error("the aside is left")
	}
}

// A folder output that exists settles once its job has run: the next run
// skips it, however its command made it.
func TestFolderOutputSettles(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"wf.yaml": "jobs:\n  - id: dir\n    run: mkdir -p some/dir && touch some/dir/f\n    inputs: [in.txt]\n    outputs: [some/dir]\n",
		"in.txt":  "in\n", "some/dir/f": "",
	})
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(dir, "some/dir"), old, old) // in.txt is newer
	mustRun(t, dir, "run", "wf.yaml")
	for range 2 {
		r := mustRun(t, dir, "run", "-n", "-v", "wf.yaml")
		if !strings.Contains(r.stdout, "skip  dir  up to date") {
			t.Fatalf("-n after the run:\n%s", r.stdout)
		}
	}
}

// A file added to an input glob reruns its job even when it is older
// than the job's output (a copied or untarred file), and so does one
// gone; -n says which.
func TestInputGlobSetReruns(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"wf.yaml":    "jobs:\n  - id: count\n    run: cat data/*.csv | wc -l > n.txt\n    inputs: [\"data/*.csv\"]\n    outputs: [n.txt]\n",
		"data/a.csv": "a\n",
	})
	mustRun(t, dir, "run", "wf.yaml")
	old := time.Now().Add(-24 * time.Hour)
	writeFiles(t, dir, map[string]string{"data/b.csv": "b\n"})
	os.Chtimes(filepath.Join(dir, "data/b.csv"), old, old)
	r := mustRun(t, dir, "run", "-n", "wf.yaml")
	if want := "run  count  input data/*.csv matches data/b.csv, which it did not when the job last ran"; !strings.Contains(r.stdout, want) {
		t.Errorf("-n after an old file was added:\n%s\nwant %q", r.stdout, want)
	}
	mustRun(t, dir, "run", "wf.yaml")
	if b, _ := os.ReadFile(filepath.Join(dir, "n.txt")); strings.TrimSpace(string(b)) != "2" {
		t.Errorf("n.txt: %q, want 2", b)
	}
	os.Remove(filepath.Join(dir, "data/a.csv"))
	r = mustRun(t, dir, "run", "-n", "wf.yaml")
	if want := "run  count  data/a.csv, which input data/*.csv matched when the job last ran, is gone"; !strings.Contains(r.stdout, want) {
		t.Errorf("-n after a file went:\n%s\nwant %q", r.stdout, want)
	}
}

// An input that does not exist and that no job makes stops the run before
// anything runs, with its job's line (make: No rule to make target).
func TestMissingSourceRefused(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.yaml": "jobs:\n  - id: a\n    run: echo ran >> ran.log\n  - id: b\n    run: cat raw.csv > clean.csv\n    inputs: [raw.csv]\n    outputs: [clean.csv]\n"})
	r := poolrun(t, dir, "run", "wf.yaml")
	if want := `wf.yaml:4: job "b": input raw.csv: it does not exist, and no job makes it`; r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and %q", r.code, r.stderr, want)
	}
	if exists(filepath.Join(dir, "ran.log")) {
		t.Error("a job ran")
	}
}

// A command longer than one argument may be (128 KiB on Linux) runs, as
// a script the shell reads; its $0 is still the shell's, and the command
// inherits no file of it.
func TestLongCommand(t *testing.T) {
	dir := t.TempDir()
	long := "x=" + strings.Repeat("y", 200<<10) + "\necho ${#x} \"$0\" > out.txt; ls /proc/$$/fd | wc -l >> out.txt\n"
	writeFiles(t, dir, map[string]string{"wf.yaml": "jobs:\n  - id: long\n    run: |\n" + indentLines(long, "      ") + "    outputs: [out.txt]\n"})
	r := mustRun(t, dir, "run", "wf.yaml")
	data, _ := os.ReadFile(filepath.Join(dir, "out.txt"))
	lines := strings.Fields(string(data))
	if len(lines) != 3 || lines[0] != "204800" || lines[1] != "/bin/sh" {
		t.Errorf("out.txt: %q, want 204800 and /bin/sh\n%s", data, r.stderr)
	}
}

// indentLines puts prefix before every line of s.
func indentLines(s, prefix string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString(prefix + l)
		}
	}
	return b.String()
}
