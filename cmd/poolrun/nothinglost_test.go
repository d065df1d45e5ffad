package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The tests of this file are the repros of issue 21 ("Nothing lost"), run
// with the real binary: a failing job deletes nothing outside its folder
// nor anything it did not write, a run cut off leaves no job looking done,
// and two runs of one workflow do not run at once.

// writeFiles writes each name (relative to dir) with its content, making
// the folders.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// syncBuffer is a bytes.Buffer that a test may read while a process
// writes into it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls until cond holds, failing the test past a generous
// deadline with what the run printed so far.
func waitFor(t *testing.T, what string, out *syncBuffer, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute; poolrun printed:\n%s", what, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Outputs outside the workflow's folder, or that could match the workflow
// file, are refused before anything runs: nothing of the victim's goes.
func TestOutputsConfined(t *testing.T) {
	tests := []struct {
		name    string
		outputs string
		foreach string
		want    string // in the message, after wf/wf.yaml:LINE:
	}{
		{"a folder beside", `["../victim/*.txt"]`, "", `outputs "../victim/*.txt": it is {ROOT}/victim/*.txt, outside the workflow's folder {ROOT}/wf`},
		{"absolute", `["{ROOT}/victim/a.txt"]`, "", `outputs "{ROOT}/victim/a.txt": it is {ROOT}/victim/a.txt, outside the workflow's folder {ROOT}/wf`},
		{"an empty foreach value", `["${d}/out/*"]`, `foreach: {d: ["", b]}`, `outputs "/out/*": it is /out/*, outside the workflow's folder {ROOT}/wf`},
		{"the whole folder", `["*"]`, "", `outputs "*": it would match the workflow file wf.yaml`},
		{"the git folder", `[".*/*"]`, "", `outputs ".*/*": it would reach into a .git folder`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			id := "x"
			if tt.foreach != "" {
				id = "x-${d}"
			}
			wf := fmt.Sprintf("jobs:\n  - id: %s\n    run: \"echo ran >> ran.log; false\"\n    outputs: %s\n", id, tt.outputs)
			if tt.foreach != "" {
				wf += "    " + tt.foreach + "\n"
			}
			wf = strings.ReplaceAll(wf, "{ROOT}", root)
			writeFiles(t, root, map[string]string{
				"wf/wf.yaml": wf, "wf/.git/config": "[core]\n", "wf/keep.txt": "keep\n",
				"victim/a.txt": "a\n", "victim/b.txt": "b\n",
			})
			r := poolrun(t, root, "run", "--force", "wf/wf.yaml")
			want := "wf/wf.yaml:4: job " + fmt.Sprintf("%q", id) + ": " + strings.ReplaceAll(tt.want, "{ROOT}", root)
			if r.code != 2 || !strings.Contains(r.stderr, want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and %q", r.code, r.stderr, want)
			}
			for _, kept := range []string{"victim/a.txt", "victim/b.txt", "wf/keep.txt", "wf/.git/config", "wf/wf.yaml"} {
				if _, err := os.Stat(filepath.Join(root, kept)); err != nil {
					t.Errorf("%s is gone: %v", kept, err)
				}
			}
			if _, err := os.Stat(filepath.Join(root, "ran.log")); err == nil {
				t.Error("the job ran")
			}
		})
	}
}

// A failed job's outputs lose only what its command wrote: an output as it
// was stays, and a pattern matches a dotfile only when it says so. A
// command that exits 0 leaving its output as it was (cp -p) succeeds.
func TestOnlyWhatTheJobWroteIsRemoved(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"wf.yaml": `jobs:
  - id: copy
    run: cp -p src.txt copy.txt
    inputs: [src.txt]
    outputs: [copy.txt]
  - id: fails
    run: echo new > out/new.txt; touch out/.hidden; exit 1
    outputs: [kept.txt, "out/*"]
`,
		"src.txt": "data\n", "kept.txt": "made before\n", "out/old.txt": "old\n",
	})
	if err := exec.Command("cp", "-p", filepath.Join(dir, "src.txt"), filepath.Join(dir, "copy.txt")).Run(); err != nil {
		t.Fatal(err)
	}
	r := poolrun(t, dir, "run", "--force", "--report", "r.json", "wf.yaml")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1 (fails fails)\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	data, err := os.ReadFile(filepath.Join(dir, "r.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Jobs []struct {
			Labels map[string]string
			Error  string
		}
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	for _, j := range rep.Jobs {
		if want := "\npoolrun removed what the job wrote: out/new.txt"; j.Labels["id"] == "fails" && !strings.HasSuffix(j.Error, want) {
			t.Errorf("the report's error of job fails: %q, want it to end with %q", j.Error, want)
		}
	}
	if strings.Contains(r.stderr, `job "copy"`) {
		t.Errorf("job copy, which left copy.txt as it was, failed:\n%s", r.stderr)
	}
	if want := "poolrun: job \"fails\" (wf.yaml:6): exit status 1\n    poolrun removed what the job wrote: out/new.txt\n"; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr:\n%s\nwant %q", r.stderr, want)
	}
	for name, want := range map[string]string{"copy.txt": "data\n", "kept.txt": "made before\n", "out/old.txt": "old\n", "out/.hidden": ""} {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out/new.txt")); err == nil {
		t.Error("out/new.txt, which the failed job wrote, is still there")
	}
}

// startRun starts poolrun run in dir and returns it, with what it prints.
func startRun(t *testing.T, dir string, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(poolrunBin, append([]string{"run"}, args...)...)
	cmd.Dir = dir
	out := new(syncBuffer)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, out
}

// A run killed with SIGKILL under a job leaves that job not done: its
// half-written output is newer than its input, and still the next run
// runs it again. Its janitor removes the lock file it held.
func TestKilledRunLeavesJobIncomplete(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"wf.yaml": `jobs:
  - id: slow
    run: echo partial > out.txt; while [ ! -e go ]; do sleep 0.05; done; echo complete >> out.txt
    inputs: [in.txt]
    outputs: [out.txt]
`,
		"in.txt": "in\n", "go": "",
	})
	mustRun(t, dir, "run", "wf.yaml")
	os.Remove(filepath.Join(dir, "go"))
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(dir, "out.txt"), old, old) // in.txt is newer

	cmd, out := startRun(t, dir, "wf.yaml")
	waitFor(t, "the job rewrote out.txt", out, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "out.txt"))
		return string(b) == "partial\n"
	})
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	// Its janitor removes the lock file it left.
	waitFor(t, "the killed run's lock file is removed", out, func() bool {
		_, err := os.Lstat(filepath.Join(dir, ".wf.yaml.poolrun-lock"))
		return os.IsNotExist(err)
	})

	r := mustRun(t, dir, "run", "-n", "wf.yaml")
	if want := "run  slow  incomplete (the last run was cut off)\n"; !strings.Contains(r.stdout, want) {
		t.Errorf("-n after the killed run:\n%s\nwant %q", r.stdout, want)
	}
	writeFiles(t, dir, map[string]string{"go": ""})
	mustRun(t, dir, "run", "wf.yaml")
	if b, _ := os.ReadFile(filepath.Join(dir, "out.txt")); string(b) != "partial\ncomplete\n" {
		t.Errorf("out.txt after the next run: %q, want it complete", b)
	}
	if r := mustRun(t, dir, "run", "-n", "-v", "wf.yaml"); !strings.Contains(r.stdout, "skip  slow  up to date") {
		t.Errorf("-n once it is done:\n%s", r.stdout)
	}
}

// A second run of a workflow that is running refuses, naming the first;
// with --wait it waits for it, and runs after it. The lock file goes with
// the last.
func TestOneRunAtATime(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"wf.yaml": `jobs:
  - id: slow
    run: echo start >> ran.log; echo partial > final.txt; while [ ! -e go ]; do sleep 0.05; done; echo complete >> final.txt; echo end >> ran.log
    outputs: [final.txt]
`,
	})
	first, out := startRun(t, dir, "--force", "wf.yaml")
	waitFor(t, "the first run's job started", out, func() bool {
		_, err := os.Stat(filepath.Join(dir, "final.txt"))
		return err == nil
	})
	r := poolrun(t, dir, "run", "wf.yaml")
	want := fmt.Sprintf("poolrun run: wf.yaml is being run by another poolrun (pid %d): wait for it to end, or give --wait", first.Process.Pid)
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("second run: exit %d, stderr:\n%s\nwant exit 1 and %q", r.code, r.stderr, want)
	}

	// One that waits ends at once on SIGTERM, as at every other stage.
	third, out3 := startRun(t, dir, "--wait", "wf.yaml")
	waitFor(t, "the third run says it waits", out3, func() bool { return strings.Contains(out3.String(), "waiting for it to end") })
	third.Process.Signal(syscall.SIGTERM)
	ended := make(chan error, 1)
	go func() { ended <- third.Wait() }()
	select {
	case err := <-ended:
		if err == nil {
			t.Errorf("the waiting run, sent SIGTERM, exited 0:\n%s", out3.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the waiting run did not end within a minute of SIGTERM:\n%s", out3.String())
	}

	second, out2 := startRun(t, dir, "--wait", "--force", "wf.yaml")
	waitFor(t, "the second run says it waits", out2, func() bool {
		return strings.Contains(out2.String(), fmt.Sprintf("wf.yaml is being run by another poolrun (pid %d); waiting for it to end", first.Process.Pid))
	})
	writeFiles(t, dir, map[string]string{"go": ""})
	if err := first.Wait(); err != nil {
		t.Fatalf("first run: %v\n%s", err, out.String())
	}
	if err := second.Wait(); err != nil {
		t.Fatalf("second run: %v\n%s", err, out2.String())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "ran.log")); string(b) != "start\nend\nstart\nend\n" {
		t.Errorf("ran.log: %q, want one run after the other", b)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".wf.yaml.poolrun-lock")); err == nil {
		t.Error("the lock file is left")
	}
}
