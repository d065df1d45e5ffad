package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tests of this file are the repros of issue 33 ("Nothing lost, part
// two") about outputs, run with the real binary: a job's outputs are the
// files it made, not whatever its patterns match; two jobs' outputs never
// overlap, nor an output and a source, a log or a report; and nothing
// outside the workflow's folder is removed through a link.

// A failing job whose pattern matches a source that the user saves while
// it runs removes what it made and nothing else, and names only that.
func TestFailingJobKeepsUsersEdit(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"wf.yaml": `jobs:
  - id: gen
    run: 'echo "// generated" > src/gen.c; touch started; while [ ! -e go ]; do sleep 0.01; done; exit 1'
    outputs: ["src/*.c"]
`,
		"src/main.c": "int main() { return 0; }\n",
	})
	cmd, out := startRun(t, dir, "--force", "wf.yaml")
	waitFor(t, "the job to start", out, func() bool { return exists(filepath.Join(dir, "started")) })
	// The user saves main.c while the job runs.
	if err := os.WriteFile(filepath.Join(dir, "src/main.c"), []byte("int main() { return 1; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatalf("the run succeeded:\n%s", out.String())
	}
	if data, err := os.ReadFile(filepath.Join(dir, "src/main.c")); err != nil || string(data) != "int main() { return 1; }\n" {
		t.Errorf("src/main.c: %q, %v; want the user's edit", data, err)
	}
	if exists(filepath.Join(dir, "src/gen.c")) {
		t.Error("src/gen.c, which the failed job made, is still there")
	}
	if want := "poolrun removed what the job wrote: src/gen.c\n"; !strings.Contains(out.String(), want) || strings.Contains(out.String(), "main.c") {
		t.Errorf("poolrun printed:\n%s\nwant %q and no word of main.c", out.String(), want)
	}
}

// A job that never ran is not done because files match its pattern: the
// first run runs it, and the job after it finds what it made; the next
// run skips both.
func TestNeverRunJobIsNotDone(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"wf.yaml": `jobs:
  - id: gen
    run: echo "int gen;" > src/gen.c
    outputs: ["src/*.c"]
  - id: build
    run: cat src/gen.c src/main.c > app
    inputs: [src/gen.c, src/main.c]
    outputs: [app]
    after: [gen]
`,
		"src/main.c": "int main;\n",
	})
	r := poolrun(t, dir, "run", "-n", "wf.yaml")
	if want := "run  gen    output src/main.c exists, but no run of this job is recorded as making it\n"; r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("-n: exit %d\n%s%s\nwant %q", r.code, r.stdout, r.stderr, want)
	}
	r = poolrun(t, dir, "run", "wf.yaml")
	if r.code != 0 {
		t.Fatalf("first run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "app")); string(data) != "int gen;\nint main;\n" {
		t.Errorf("app: %q", data)
	}
	r = poolrun(t, dir, "run", "-n", "-v", "wf.yaml")
	if want := "skip  gen    up to date\nskip  build  up to date\n"; !strings.Contains(r.stdout, want) {
		t.Errorf("-n after the run:\n%s\nwant %q", r.stdout, want)
	}
}

// Outputs that could name the same file as another job's, a source, a
// log or the report are refused before anything runs, exit status 2,
// with the lines of both.
func TestOverlappingOutputsRefused(t *testing.T) {
	tests := []struct {
		name  string
		wf    string
		files map[string]string
		args  []string
		want  string
	}{
		{"another job's output", `jobs:
  - id: a
    run: echo ran >> ran.log; touch res-a.txt; false
    outputs: ['res-*.txt']
  - id: b
    run: echo ran >> ran.log; touch res-b.txt
    outputs: [res-b.txt]
`, nil, nil, `wf.yaml:4: job "a": outputs "res-*.txt" can match outputs "res-b.txt" of job "b" (wf.yaml:7): a file may be the output of one job only`},
		{"a source", `jobs:
  - id: gen
    run: echo ran >> ran.log
    outputs: ["src/*.c"]
  - id: build
    run: echo ran >> ran.log
    inputs: [src/main.c]
`, map[string]string{"src/main.c": "x\n"}, nil, `wf.yaml:4: job "gen": outputs "src/*.c" can match input "src/main.c" of job "build" (wf.yaml:5), a file that no job makes`},
		{"the job logs", `jobs:
  - id: a
    run: echo ran >> ran.log; false
    outputs: ['*.err']
`, nil, []string{"--log-dir", "."}, `wf.yaml:2: job "a": outputs "*.err" can match the jobs' logs in {DIR} (the log folder): a log is no job's output`},
		{"the report", `jobs:
  - id: a
    run: echo ran >> ran.log
    outputs: ['*.json']
`, nil, []string{"--report", "r.json"}, `--report r.json: wf.yaml:2: job "a": outputs "*.json" can match it`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{"wf.yaml": tt.wf}
			for k, v := range tt.files {
				files[k] = v
			}
			writeFiles(t, dir, files)
			r := poolrun(t, dir, append(append([]string{"run"}, tt.args...), "wf.yaml")...)
			want := strings.ReplaceAll(tt.want, "{DIR}", dir)
			if r.code != 2 || !strings.Contains(r.stderr, want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and %q", r.code, r.stderr, want)
			}
			if exists(filepath.Join(dir, "ran.log")) {
				t.Error("a job ran")
			}
		})
	}
}

// A link inside the workflow's folder that leads out of it cannot carry
// an output there, nor can workdir: /; nothing of the victim's goes.
func TestOutputsConfinedAfterLinks(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"wf/wf.yaml":   "jobs:\n  - id: x\n    run: echo ran >> ../ran.log; touch link/new; false\n    outputs: ['link/*']\n",
		"wf/root.yaml": "workdir: /\njobs:\n  - id: x\n    run: echo ran >> ran.log; false\n    outputs: ['tmp/x']\n",
		"victim/a.txt": "a\n",
	})
	if err := os.Symlink("../victim", filepath.Join(root, "wf", "link")); err != nil {
		t.Fatal(err)
	}
	r := poolrun(t, root, "run", "--force", "wf/wf.yaml")
	if want := `wf/wf.yaml:4: job "x": outputs "link/*": its folder link is ` + root + `/victim once links are followed, outside the workflow's folder ` + root + `/wf`; r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and %q", r.code, r.stderr, want)
	}
	r = poolrun(t, root, "run", "wf/root.yaml")
	if want := "wf/root.yaml:1: workdir / is the root folder"; r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and %q", r.code, r.stderr, want)
	}
	if data, err := os.ReadFile(filepath.Join(root, "victim/a.txt")); err != nil || string(data) != "a\n" {
		t.Errorf("victim/a.txt: %q, %v", data, err)
	}
	if exists(filepath.Join(root, "ran.log")) || exists(filepath.Join(root, "victim/new")) {
		t.Error("a job ran")
	}
}

// exists reports whether something is at path (a symbolic link counts).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
