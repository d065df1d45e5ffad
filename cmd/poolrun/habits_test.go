package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The habits of make and Snakemake that poolrun run keeps: it stops
// starting jobs after a failure (-k goes on), echoes commands with -v,
// prints only what would run with -n, lists its entries with --list,
// reads poolrun.yaml without a file, and completes its words in a shell.

// failFirst is a workflow whose first job fails, and whose others need
// nothing: one worker (-j 1) takes them in file order.
const failFirst = `jobs:
  - id: bad
    run: exit 3
  - id: a
    run: touch ran-a
  - id: b
    run: touch ran-b
  - id: c
    run: touch ran-c
    after: [bad]
`

// After a failure no job starts, by default and with --fail-fast, and
// the run ends with exit status 1, the jobs not started cancelled; -k
// starts those that do not need the failed job.
func TestRunStopsAfterFailure(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		ran  []string
	}{
		{"default", nil, nil},
		{"--fail-fast", []string{"--fail-fast"}, nil},
		{"-k", []string{"-k"}, []string{"a", "b"}},
		{"--keep-going", []string{"--keep-going"}, []string{"a", "b"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"wf.yaml": failFirst})
			args := append([]string{"run", "-j", "1", "--report", "r.json", "wf.yaml"}, tt.args...)
			r := poolrun(t, dir, args...)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
			}
			if got := ranFiles(t, dir); !slices.Equal(got, tt.ran) {
				t.Errorf("ran %q, want %q", got, tt.ran)
			}
			st := readFaultReport(t, filepath.Join(dir, "r.json")).statuses()
			want := map[string]string{"bad": "failed", "a": "cancelled", "b": "cancelled", "c": "cancelled"}
			for _, id := range tt.ran {
				want[id] = "succeeded"
			}
			for id, s := range want {
				if st[id] != s {
					t.Errorf("job %s: %s, want %s", id, st[id], s)
				}
			}
		})
	}
	r := poolrun(t, t.TempDir(), "run", "-k", "--fail-fast", "wf.yaml")
	if want := "poolrun run: -k (--keep-going) and --fail-fast: give one of them\n"; r.code != 2 || r.stderr != want {
		t.Errorf("-k --fail-fast: exit %d, stderr %q; want 2 and %q", r.code, r.stderr, want)
	}
}

// A job that is running when another fails finishes, and keeps its
// outputs; one that fails with a retry left is not a failure: the run
// goes on.
func TestRunAfterFailureRunningFinish(t *testing.T) {
	dir := t.TempDir()
	// slow starts, then bad fails once slow runs; slow goes on a while
	// after that, so that it most likely still runs when poolrun hears
	// of the failure (should it end first, the test still holds).
	writeFiles(t, dir, map[string]string{"wf.yaml": `jobs:
  - id: slow
    run: |
      touch slow.started
      i=0; until [ -e bad.exiting ] || [ $i -ge 3000 ]; do sleep 0.01; i=$((i+1)); done
      sleep 0.5
      echo done > slow.out
    outputs: [slow.out]
  - id: bad
    run: |
      i=0; until [ -e slow.started ] || [ $i -ge 3000 ]; do sleep 0.01; i=$((i+1)); done
      touch bad.exiting
      exit 3
`})
	r := poolrun(t, dir, "run", "-j", "2", "--report", "r.json", "wf.yaml")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	st := readFaultReport(t, filepath.Join(dir, "r.json")).statuses()
	if st["slow"] != "succeeded" || st["bad"] != "failed" {
		t.Errorf("slow %s, bad %s; want succeeded, failed", st["slow"], st["bad"])
	}
	if data, err := os.ReadFile(filepath.Join(dir, "slow.out")); err != nil || string(data) != "done\n" {
		t.Errorf("slow.out: %q, %v; want the running job's output, kept", data, err)
	}
	if r := mustRun(t, dir, "run", "-n", "-v", "wf.yaml"); !strings.Contains(r.stdout, "skip  slow") {
		t.Errorf("the job that finished is not up to date for the next run:\n%s", r.stdout)
	}

	dir = t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.yaml": `jobs:
  - id: flaky
    run: if [ -e tried ]; then touch ran-flaky; else touch tried; exit 1; fi
    retries: 1
  - id: a
    run: touch ran-a
  - id: b
    run: touch ran-b
`})
	mustRun(t, dir, "run", "-j", "1", "wf.yaml")
	if got, want := ranFiles(t, dir), []string{"a", "b", "flaky"}; !slices.Equal(got, want) {
		t.Errorf("after a failed run with a retry left, ran %q, want %q", got, want)
	}
}

// -v prints each command, each of its lines after [JOB-ID], on standard
// output before what it prints; with --log-dir too, where the output
// goes to the logs.
func TestRunVerboseEchoes(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.yaml": `jobs:
  - id: hello
    run: |
      echo hi
      echo there
  - id: after
    run: echo after
    after: [hello]
`})
	r := mustRun(t, dir, "run", "-v", "--quiet", "wf.yaml")
	want := "[hello] echo hi\n[hello] echo there\nhi\nthere\n[after] echo after\nafter\n"
	if r.stdout != want {
		t.Errorf("-v printed:\n%s\nwant:\n%s", r.stdout, want)
	}
	r = mustRun(t, dir, "run", "-v", "--quiet", "--log-dir", "logs", "wf.yaml")
	// The logs: line is poolrun's own, on standard error with the end.
	if r.stdout != "[hello] echo hi\n[hello] echo there\n[after] echo after\n" {
		t.Errorf("-v --log-dir printed:\n%s", r.stdout)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "logs", "hello.out")); string(data) != "hi\nthere\n" {
		t.Errorf("hello.out: %q, want the command's output alone", data)
	}
	if r := mustRun(t, dir, "run", "--quiet", "wf.yaml"); r.stdout != "hi\nthere\nafter\n" {
		t.Errorf("without -v: %q", r.stdout)
	}
}

// -n prints the jobs that would run, and how many are up to date; -n -v
// lists every job, run or skip.
func TestRunDryRunCounts(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.yaml": `jobs:
  - id: make-${i}
    foreach: {i: 1..3}
    run: echo ${i} > out-${i}.txt
    outputs: ["out-${i}.txt"]
  - id: always
    run: "true"
`})
	mustRun(t, dir, "run", "wf.yaml")
	r := mustRun(t, dir, "run", "-n", "wf.yaml")
	if want := "run  always  no outputs declared\n1 to run, 3 up to date (-v lists them)\n"; r.stdout != want {
		t.Errorf("-n printed:\n%s\nwant:\n%s", r.stdout, want)
	}
	r = mustRun(t, dir, "run", "-n", "-v", "wf.yaml")
	want := "skip  make-1  up to date\nskip  make-2  up to date\nskip  make-3  up to date\nrun   always  no outputs declared\n1 to run, 3 to skip\n"
	if r.stdout != want {
		t.Errorf("-n -v printed:\n%s\nwant:\n%s", r.stdout, want)
	}
}

// --list prints each entry: its id as written, FILE:LINE, its jobs and
// its desc:; with targets, those of the jobs they need. --list-ids the
// ids of the jobs.
func TestRunList(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.yaml": `vars: {ref: hg38}
jobs:
  - id: merge
    run: cat part-*
    after: ["align-*"]
    desc: join the parts
  - id: align-${i}-${ref}
    foreach: {i: 1..4}
    run: ./align ${i}
    desc: align part ${i}
  - id: other
    run: "true"
`})
	r := mustRun(t, dir, "run", "--list", "wf.yaml")
	want := "merge              wf.yaml:3   1 job   join the parts\n" +
		"align-${i}-${ref}  wf.yaml:7   4 jobs  align part ${i}\n" +
		"other              wf.yaml:11  1 job\n"
	if r.stdout != want {
		t.Errorf("--list printed:\n%s\nwant:\n%s", r.stdout, want)
	}
	r = mustRun(t, dir, "run", "--list", "wf.yaml", "align-2-hg38")
	if want := "align-${i}-${ref}  wf.yaml:7  1 job  align part ${i}\n"; r.stdout != want {
		t.Errorf("--list with a target printed:\n%s\nwant:\n%s", r.stdout, want)
	}
	r = mustRun(t, dir, "run", "--list-ids", "wf.yaml")
	if want := "align-1-hg38\nalign-2-hg38\nalign-3-hg38\nalign-4-hg38\nmerge\nother\n"; r.stdout != want {
		t.Errorf("--list-ids printed:\n%s\nwant:\n%s", r.stdout, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("--list wrote files: %v", entries)
	}
	r = poolrun(t, dir, "run", "--list", "-n", "wf.yaml")
	if want := "poolrun run: -n (--dry-run) and --list: give one of them\n"; r.code != 2 || r.stderr != want {
		t.Errorf("--list -n: exit %d, stderr %q; want 2 and %q", r.code, r.stderr, want)
	}
	writeFiles(t, dir, map[string]string{"bad.yaml": "jobs:\n  - id: a\n    run: x\n    desc: {a: b}\n"})
	r = poolrun(t, dir, "run", "--list", "bad.yaml")
	if want := `bad.yaml:4: job "a": desc must be a string, not a mapping`; r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Errorf("a desc that is no string: exit %d, stderr %q; want 2 and %q", r.code, r.stderr, want)
	}
}

// Without a workflow file, poolrun run reads poolrun.yaml; a first
// argument that is no file is a target of it; with no poolrun.yaml
// either, the error says so.
func TestRunDefaultFile(t *testing.T) {
	dir := t.TempDir()
	r := poolrun(t, dir, "run")
	if want := "poolrun run: no workflow file given, and no poolrun.yaml here; see 'poolrun help run'\n"; r.code != 2 || r.stderr != want {
		t.Errorf("poolrun run with no file: exit %d, stderr %q; want 2 and %q", r.code, r.stderr, want)
	}
	r = poolrun(t, dir, "run", "merge")
	if r.code != 2 || !strings.Contains(r.stderr, "merge") {
		t.Errorf("poolrun run merge, with no poolrun.yaml: exit %d, stderr %q; want 2 and an error that names merge", r.code, r.stderr)
	}
	writeFiles(t, dir, map[string]string{"poolrun.yaml": targetsWorkflow})
	mustRun(t, dir, "run", "--quiet", "side")
	if got, want := ranFiles(t, dir), []string{"prep", "side"}; !slices.Equal(got, want) {
		t.Errorf("poolrun run side ran %q, want %q", got, want)
	}
	mustRun(t, dir, "run", "--quiet")
	if got := ranFiles(t, dir); len(got) != 7 {
		t.Errorf("poolrun run ran %q, want every job", got)
	}
	writeFiles(t, dir, map[string]string{"sub/x": ""})
	r = poolrun(t, filepath.Join(dir, "sub"), "run", "-C", "..", "-n")
	if r.code != 0 || !strings.Contains(r.stdout, "2 to run, 5 up to date") {
		t.Errorf("poolrun run -C .. -n: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// poolrun help run lists every flag of poolrun run and every field of a
// job, and says what the new defaults are.
func TestRunHelpHabits(t *testing.T) {
	r := mustRun(t, t.TempDir(), "help", "run")
	for _, want := range []string{
		"-k, --keep-going", "-v, --verbose", "--list\n", "--list-ids\n", "--fail-fast\n", "desc: TEXT",
		"Usage: poolrun run [flags] [FILE] [TARGET...]", "reads poolrun.yaml", "no workflow file given, and no poolrun.yaml here",
		"After a job fails, no other job starts", "12 up to date",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("poolrun help run lacks %q", want)
		}
	}
}

// poolrun completion bash prints a script that bash reads, and that
// completes commands, flags, file names and, after poolrun run FILE, the
// ids of FILE's jobs (or of poolrun.yaml's, with no FILE); zsh's and
// fish's are made. Its job ids come from poolrun run --list-ids.
func TestCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash here")
	}
	dir := t.TempDir()
	r := mustRun(t, dir, "completion", "bash")
	script := filepath.Join(dir, "poolrun.bash")
	writeFiles(t, dir, map[string]string{"poolrun.bash": r.stdout, "wf.yaml": targetsWorkflow})
	if out, err := exec.Command(bash, "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	// comp WORD... completes the last word, as bash does on TAB.
	driver := `source ./poolrun.bash
comp() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _poolrun; printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' '; echo; }
comp poolrun ru
comp poolrun run --keep
comp poolrun run -j 2 wf.yaml par
comp poolrun run wf.yaml prep ''
comp poolrun run --report ''
comp poolrun run wf
comp poolrun help sc
comp poolrun completion ''
comp poolrun run -C sub ''
comp poolrun run --directory=sub ''
comp poolrun run -C=sub ''
comp poolrun run -Csub ''
comp poolrun run ''
comp poolrun run pre
`
	writeFiles(t, dir, map[string]string{"driver.sh": driver, "sub/poolrun.yaml": "jobs:\n  - {id: in-sub, run: x}\n"})
	cmd := exec.Command(bash, "driver.sh")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(poolrunBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash driver.sh: %v\n%s", err, out)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	ids := "merge part-1 part-2 part-3 prep side unrelated "
	files := "driver.sh poolrun.bash sub wf.yaml "
	want := []string{
		"run ",
		"--keep-going ",
		"part-1 part-2 part-3 ",
		ids,
		files,
		"wf.yaml ",
		"scaffold ",
		"bash fish zsh ",
		"in-sub poolrun.yaml ", // FILE is in -C's folder
		"in-sub poolrun.yaml ", // -C's three other spellings
		"in-sub poolrun.yaml ",
		"in-sub poolrun.yaml ",
		files, // no poolrun.yaml here: no ids
		" ",   // nothing
	}
	if len(got) != len(want) {
		t.Fatalf("the completions:\n%s\nwant %d lines", out, len(want))
	}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("completion %d: %q, want %q", i+1, got[i], w)
		}
	}
	for _, shell := range []string{"zsh", "fish"} {
		r := mustRun(t, dir, "completion", shell)
		if !strings.Contains(r.stdout, "poolrun") || !strings.Contains(r.stdout, "--list-ids") || !strings.Contains(r.stdout, "keep-going") {
			t.Errorf("poolrun completion %s:\n%s", shell, r.stdout)
		}
		writeFiles(t, dir, map[string]string{"poolrun." + shell: r.stdout})
	}
	t.Run("zsh", func(t *testing.T) { completeZsh(t, dir) })
	t.Run("fish", func(t *testing.T) { completeFish(t, dir) })
	r = poolrun(t, dir, "completion", "tcsh")
	if r.code != 2 || !strings.Contains(r.stderr, `unknown shell "tcsh"`) {
		t.Errorf("poolrun completion tcsh: exit %d, stderr %q", r.code, r.stderr)
	}
}

// completeZsh completes poolrun's words in zsh, in dir, through the
// script of poolrun completion zsh there (poolrun.zsh). zsh's compadd
// filters COMPREPLY by the word typed, so the cases type no word.
func completeZsh(t *testing.T, dir string) {
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Skip("no zsh here")
	}
	driver := `autoload -U compinit && compinit -u
source ./poolrun.zsh
comp() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _poolrun; printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' '; echo; }
comp poolrun run wf.yaml ''
comp poolrun run -C sub ''
comp poolrun run -C=sub ''
comp poolrun completion ''
`
	writeFiles(t, dir, map[string]string{"driver.zsh": driver})
	cmd := exec.Command(zsh, "-f", "driver.zsh")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(poolrunBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("zsh driver.zsh: %v\n%s", err, out)
	}
	want := "merge part-1 part-2 part-3 prep side unrelated \n" +
		"in-sub poolrun.yaml \n" +
		"in-sub poolrun.yaml \n" +
		"bash fish zsh \n"
	if string(out) != want {
		t.Errorf("zsh's completions:\n%s\nwant:\n%s", out, want)
	}
}

// completeFish completes poolrun's words in fish, in dir, through the
// script of poolrun completion fish there (poolrun.fish), as fish does
// on TAB (complete -C).
func completeFish(t *testing.T, dir string) {
	fish, err := exec.LookPath("fish")
	if err != nil {
		t.Skip("no fish here")
	}
	script := `source poolrun.fish
for line in 'poolrun ru' 'poolrun run --keep' 'poolrun run wf.yaml par' 'poolrun run -C sub in' 'poolrun run --directory=sub in' 'poolrun completion z'
	complete -C"$line" | string join ' '
end
true
`
	cmd := exec.Command(fish, "--no-config", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(poolrunBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fish: %v\n%s", err, out)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	want := []string{"run", "--keep-going", "part-1 part-2 part-3", "in-sub", "in-sub", "zsh"}
	if len(got) != len(want) {
		t.Fatalf("fish's completions:\n%s\nwant %d lines", out, len(want))
	}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("fish completion %d: %q, want %q", i+1, got[i], w)
		}
	}
}
