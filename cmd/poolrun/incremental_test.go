package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// incrementalFlow is a workflow whose jobs each append their id to
// ran.log: prepare makes clean.txt of raw.txt, count-a and count-b each
// count a letter of clean.txt with their own weights file, report joins
// the counts, and unrelated copies other.txt. Every job declares its
// inputs and outputs.
const incrementalFlow = `
jobs:
  - id: prepare
    run: echo prepare >> ran.log; sort raw.txt > clean.txt
    inputs: [raw.txt]
    outputs: [clean.txt]
  - id: count-${k}
    foreach: {k: [a, b]}
    run: echo count-${k} >> ran.log; grep -c ${k} clean.txt > count-${k}.txt; cat weights-${k}.txt >> count-${k}.txt
    inputs:
      - clean.txt
      - weights-${k}.txt
    outputs: ["count-${k}.txt"]
    after: [prepare]
  - id: report
    run: echo report >> ran.log; cat count-a.txt count-b.txt > report.txt
    inputs: ["count-*.txt"]
    outputs: [report.txt]
    after: ["count-*"]
  - id: unrelated
    run: echo unrelated >> ran.log; cp other.txt other.out
    inputs: [other.txt]
    outputs: [other.out]
`

// incrementalDir returns a folder with incrementalFlow as wf.yaml and the
// files its jobs read.
func incrementalDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"wf.yaml": incrementalFlow, "raw.txt": "b\na\nb\n", "weights-a.txt": "1\n", "weights-b.txt": "2\n", "other.txt": "o\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// ran returns the ids that ran.log of dir lists, and removes it.
func ran(t *testing.T, dir string) []string {
	t.Helper()
	path := filepath.Join(dir, "ran.log")
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	ids := strings.Fields(string(data))
	slices.Sort(ids)
	return ids
}

// mustRun runs poolrun in dir with args and fails the test unless it exits 0.
func mustRun(t *testing.T, dir string, args ...string) result {
	t.Helper()
	r := poolrun(t, dir, args...)
	if r.code != 0 {
		t.Fatalf("poolrun %q: exit %d\n%s\n%s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// age sets the modification time of every file in dir to an hour ago, so
// that a file given a later time (touch) is newer than all the others
// without a wait, and still in the past when the jobs write theirs.
func age(t *testing.T, dir string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.Chtimes(filepath.Join(dir, e.Name()), old, old); err != nil {
			t.Fatal(err)
		}
	}
}

// touch gives the file name of dir a modification time half an hour ago:
// newer than what age left, older than what a job writes now.
func touch(t *testing.T, dir, name string) {
	t.Helper()
	at := time.Now().Add(-30 * time.Minute)
	if err := os.Chtimes(filepath.Join(dir, name), at, at); err != nil {
		t.Fatal(err)
	}
}

// A second run of an unchanged workflow runs no command; a touched input
// reruns exactly the jobs that depend on it, transitively; the skipped
// jobs show as such in the summary and the report.
func TestIncrementalRuns(t *testing.T) {
	dir := incrementalDir(t)
	all := []string{"count-a", "count-b", "prepare", "report", "unrelated"}
	mustRun(t, dir, "run", "-j", "2", "wf.yaml")
	if got := ran(t, dir); !slices.Equal(got, all) {
		t.Fatalf("first run ran %q, want %q", got, all)
	}
	if _, err := os.Stat(filepath.Join(dir, ".wf.yaml.poolrun-state")); err != nil {
		t.Errorf("no state file after the first run: %v", err)
	}

	r := mustRun(t, dir, "run", "-j", "2", "--report", "report.json", "wf.yaml")
	if got := ran(t, dir); got != nil {
		t.Errorf("second run of an unchanged workflow ran %q", got)
	}
	if got := line(r.stderr, "5 jobs:"); !strings.HasPrefix(got, "5 skipped (up to date);") {
		t.Errorf("summary line %q, want 5 skipped", got)
	}
	var rep struct {
		Jobs []struct {
			Labels map[string]string `json:"labels"`
			Status string            `json:"status"`
		} `json:"jobs"`
		Totals struct {
			ByStatus map[string]int `json:"by_status"`
		} `json:"totals"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	for _, j := range rep.Jobs {
		if j.Status != "skipped" {
			t.Errorf("report: job %s is %q, want skipped", j.Labels["id"], j.Status)
		}
	}
	if len(rep.Jobs) != 5 || rep.Totals.ByStatus["skipped"] != 5 {
		t.Errorf("report: %d jobs, by status %v; want 5 skipped", len(rep.Jobs), rep.Totals.ByStatus)
	}

	for _, tt := range []struct {
		touched string
		want    []string
	}{
		{"weights-a.txt", []string{"count-a", "report"}},
		{"raw.txt", []string{"count-a", "count-b", "prepare", "report"}},
		{"other.txt", []string{"unrelated"}},
		{"clean.txt", []string{"count-a", "count-b", "report"}},
	} {
		age(t, dir)
		touch(t, dir, tt.touched)
		mustRun(t, dir, "run", "--serial", "wf.yaml")
		if got := ran(t, dir); !slices.Equal(got, tt.want) {
			t.Errorf("%s touched: ran %q, want %q", tt.touched, got, tt.want)
		}
		mustRun(t, dir, "run", "--serial", "wf.yaml")
		if got := ran(t, dir); got != nil {
			t.Errorf("%s touched: the run after ran %q", tt.touched, got)
		}
	}
}

// A changed command reruns its job, and the jobs after it; -n says why.
func TestIncrementalChangedCommand(t *testing.T) {
	dir := incrementalDir(t)
	mustRun(t, dir, "run", "--serial", "wf.yaml")
	ran(t, dir)
	changed := strings.Replace(incrementalFlow, "cat count-a.txt count-b.txt > report.txt", "cat count-b.txt count-a.txt > report.txt", 1)
	if err := os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, dir, "run", "-n", "wf.yaml")
	if !regexp.MustCompile(`(?m)^run +report +its command changed$`).MatchString(r.stdout) {
		t.Errorf("-n does not say the command of report changed:\n%s", r.stdout)
	}
	mustRun(t, dir, "run", "--serial", "wf.yaml")
	if got, want := ran(t, dir), []string{"report"}; !slices.Equal(got, want) {
		t.Errorf("ran %q, want %q", got, want)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "report.txt")); string(data) != "2\n2\n1\n1\n" {
		t.Errorf("report.txt holds %q: the new command did not make it", data)
	}
}

// What a failing job wrote of its declared outputs is gone afterwards,
// its last outputs back as they were, and one that exits 0 without
// writing its output fails, naming it.
func TestIncrementalFailedOutputs(t *testing.T) {
	dir := t.TempDir()
	wf := `
jobs:
  - id: half
    run: echo half > half.txt; mkdir -p parts; echo p > parts/1.part; exit 3
    outputs: [half.txt, "parts/*.part"]
  - id: lazy
    run: echo lazy >> ran.log
    outputs: [lazy.txt]
  - id: after-half
    run: echo after-half >> ran.log
    after: [half]
`
	if err := os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(wf), 0o644); err != nil {
		t.Fatal(err)
	}
	// An old half.txt: out of date, set aside while the job runs, and put
	// back once what the failed command wrote is removed.
	if err := os.WriteFile(filepath.Join(dir, "half.txt"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := poolrun(t, dir, "run", "-j", "2", "wf.yaml")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, gone := range []string{"parts/1.part", "lazy.txt"} {
		if _, err := os.Lstat(filepath.Join(dir, gone)); err == nil {
			t.Errorf("%s, an output of a failed job, is still there", gone)
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, "half.txt")); err != nil || string(data) != "old\n" {
		t.Errorf("half.txt: %q, %v; want the old one back", data, err)
	}
	for _, want := range []string{
		"poolrun: job \"half\" (wf.yaml:3): exit status 3\n    poolrun removed what the job wrote: half.txt, parts/1.part\n",
		`poolrun: job "lazy" (wf.yaml:6): output lazy.txt: the command exited 0 without making this output`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	if got, want := ran(t, dir), []string{"lazy"}; !slices.Equal(got, want) {
		t.Errorf("ran %q, want %q", got, want)
	}
	if got := line(r.stderr, "3 jobs:"); !strings.HasPrefix(got, "2 failed, 1 cancelled;") {
		t.Errorf("summary line %q, want 2 failed, 1 cancelled", got)
	}
}

// snapshot returns every path under dir with its modification time and
// size.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		files[path] = fmt.Sprintf("%v %v %d bytes", fi.ModTime(), fi.Mode(), fi.Size())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// -n -v prints what would run and why, and what would be skipped, and runs
// nothing and changes nothing: no file, no state file, no scratch folder.
func TestDryRun(t *testing.T) {
	dir := incrementalDir(t)
	// An item, so that a run would make a scratch folder in TMPDIR, on
	// a memory file system where there is one.
	flow := "items:\n  ref: {run: 'echo x > \"$POOLRUN_ITEM\"'}\n" + strings.Replace(incrementalFlow, "    after: [prepare]\n", "    after: [prepare]\n    needs: [ref]\n", 1)
	if err := os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(flow), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if tmp, err = os.MkdirTemp("/dev/shm", "poolrun-dry-run-test-"); err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(tmp)
	}

	check := func(want string) {
		t.Helper()
		before := snapshot(t, dir)
		cmd := exec.Command(poolrunBin, "run", "-n", "-v", "wf.yaml")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("poolrun run -n -v: %v\n%s", err, errb.String())
		}
		if out.String() != want {
			t.Errorf("poolrun run -n -v printed:\n%s\nwant:\n%s", out.String(), want)
		}
		after := snapshot(t, dir)
		for path, was := range before {
			if now, ok := after[path]; !ok || now != was {
				t.Errorf("%s changed: %s, now %s", path, was, now)
			}
		}
		for path := range after {
			if _, ok := before[path]; !ok {
				t.Errorf("%s appeared", path)
			}
		}
		if left, _ := os.ReadDir(tmp); len(left) > 0 {
			t.Errorf("TMPDIR holds %s", left[0].Name())
		}
	}
	check(`run  prepare    output clean.txt is missing
run  count-a    output count-a.txt is missing
run  count-b    output count-b.txt is missing
run  report     output report.txt is missing
run  unrelated  output other.out is missing
5 to run, 0 to skip
`)
	mustRun(t, dir, "run", "--serial", "wf.yaml")
	ran(t, dir)
	age(t, dir)
	touch(t, dir, "weights-b.txt")
	check(`skip  prepare    up to date
skip  count-a    up to date
run   count-b    input weights-b.txt is newer than output count-b.txt
run   report     runs after count-b, which will run
skip  unrelated  up to date
2 to run, 3 to skip
`)
}

// --dag prints the job graph in dot, each job coloured by what a run would
// do, and runs nothing.
func TestDag(t *testing.T) {
	dir := incrementalDir(t)
	mustRun(t, dir, "run", "--serial", "wf.yaml")
	ran(t, dir)
	age(t, dir)
	touch(t, dir, "weights-a.txt")
	r := mustRun(t, dir, "run", "--dag", "wf.yaml")
	if got := ran(t, dir); got != nil {
		t.Errorf("--dag ran %q", got)
	}
	for _, want := range []string{
		`"prepare" [fillcolor="#d9d9d9", tooltip="skip: up to date"];`,
		`"count-a" [fillcolor="#f4a261", tooltip="run: input weights-a.txt is newer than output count-a.txt"];`,
		`"count-b" [fillcolor="#d9d9d9", tooltip="skip: up to date"];`,
		`"report" [fillcolor="#f4a261", tooltip="run: runs after count-a, which will run"];`,
		`"unrelated" [fillcolor="#d9d9d9", tooltip="skip: up to date"];`,
		`"prepare" -> "count-a";`, `"prepare" -> "count-b";`, `"count-a" -> "report";`, `"count-b" -> "report";`,
	} {
		if !strings.Contains(r.stdout, "\t"+want+"\n") {
			t.Errorf("--dag output has no line %s:\n%s", want, r.stdout)
		}
	}
	if !strings.HasPrefix(r.stdout, `digraph "wf.yaml" {`+"\n") || !strings.HasSuffix(r.stdout, "\n}\n") || strings.Count(r.stdout, "->") != 4 {
		t.Errorf("--dag output is not one digraph with 4 edges:\n%s", r.stdout)
	}
	dot, err := exec.LookPath("dot")
	if err != nil {
		t.Log("Graphviz's dot is not installed: the output is not rendered")
		return
	}
	cmd := exec.Command(dot, "-Tsvg")
	cmd.Stdin = strings.NewReader(r.stdout)
	var svg, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &svg, &errb
	if err := cmd.Run(); err != nil || errb.Len() > 0 {
		t.Fatalf("dot -Tsvg: %v\n%s", err, errb.String())
	}
	for _, id := range []string{"prepare", "count-a", "count-b", "report", "unrelated"} {
		if !strings.Contains(svg.String(), ">"+strings.ReplaceAll(id, "-", "&#45;")+"</text>") {
			t.Errorf("the SVG has no node %s", id)
		}
	}
}

// The forms of --force: alone (every job), with a glob, repeated or
// comma-separated; a pattern that matches nothing, or is malformed, is
// refused naming the flag.
func TestForce(t *testing.T) {
	dir := incrementalDir(t)
	mustRun(t, dir, "run", "--serial", "wf.yaml")
	ran(t, dir)

	mustRun(t, dir, "run", "--serial", "--force", "count-*", "wf.yaml")
	if got, want := ran(t, dir), []string{"count-a", "count-b", "report"}; !slices.Equal(got, want) {
		t.Errorf("--force count-*: ran %q, want %q", got, want)
	}
	mustRun(t, dir, "run", "--serial", "--force", "wf.yaml")
	if got, want := ran(t, dir), []string{"count-a", "count-b", "prepare", "report", "unrelated"}; !slices.Equal(got, want) {
		t.Errorf("--force: ran %q, want %q", got, want)
	}

	forced := regexp.MustCompile(`(?m)^run +(\S+) +forced$`)
	for _, tt := range []struct {
		args []string
		want []string // the jobs -n says are forced
	}{
		{[]string{"--force", "unrelated", "--force", "count-b"}, []string{"count-b", "unrelated"}},
		{[]string{"--force=unrelated,count-b"}, []string{"count-b", "unrelated"}},
		{[]string{"--force", "-j", "1"}, []string{"count-a", "count-b", "prepare", "report", "unrelated"}},
		{[]string{"-j", "1", "--force"}, []string{"count-a", "count-b", "prepare", "report", "unrelated"}},
	} {
		r := mustRun(t, dir, append(append([]string{"run", "-n"}, tt.args...), "wf.yaml")...)
		var got []string
		for _, m := range forced.FindAllStringSubmatch(r.stdout, -1) {
			got = append(got, m[1])
		}
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("-n %q: forced %q, want %q\n%s", tt.args, got, tt.want, r.stdout)
		}
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--force", "nope"}, "poolrun run: --force nope: no job of wf.yaml matches it"},
		{[]string{"--force", "count-["}, `poolrun run: --force count-[: workflow: bad pattern "count-["`},
		{[]string{"--force="}, `poolrun run: --force "": want job ids or globs`},
		{[]string{"-n", "--dag"}, "poolrun run: -n (--dry-run) and --dag: give one of them"},
	} {
		r := poolrun(t, dir, append(append([]string{"run"}, tt.args...), "wf.yaml")...)
		if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("poolrun run %q: exit %d, stderr %q; want 2 and %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
	if got := ran(t, dir); got != nil {
		t.Errorf("refused runs ran %q", got)
	}
}

// A workflow with several mistakes gets each reported on a line of its
// own, FILE:LINE: what is wrong, before anything runs, with exit status 2.
func TestRunReportsEveryMistake(t *testing.T) {
	dir := t.TempDir()
	wf := `jobs:
  - id: a
    run: touch ran-a
    colour: red
  - id: b
    run: touch ran-b
    after: [nope]
  - id: c
    run: touch ran-c
    timeout: soon
    outputs: [.]
  - id: d
    run: touch ran-d
    needs: [ref]
`
	if err := os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(wf), 0o644); err != nil {
		t.Fatal(err)
	}
	r := poolrun(t, dir, "run", "wf.yaml")
	if r.code != 2 {
		t.Errorf("exit %d, want 2", r.code)
	}
	want := []string{
		`wf.yaml:4: job "a": unknown field "colour" (a job has id, run, worker, args, after, needs, inputs, outputs, foreach, timeout, retries, retry_delay, threads, mem, resources and desc)`,
		`wf.yaml:7: job "b": after "nope": no such job`,
		`wf.yaml:10: job "c": timeout "soon" is not a duration: write a number and a unit, such as 90s, 2m or 1h30m`,
		`wf.yaml:11: job "c": outputs ".": the workflow's folder itself cannot be an output`,
		`wf.yaml:14: job "d": needs "ref": no such item`,
	}
	if got := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n"); !slices.Equal(got, want) {
		t.Errorf("stderr:\n%s\nwant:\n%s", r.stderr, strings.Join(want, "\n"))
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the folder holds %d entries: something ran", len(entries))
	}
}

// An interrupted job's declared outputs are gone afterwards too; what
// finished is recorded, and the next run skips it.
func TestIncrementalInterrupt(t *testing.T) {
	dir := t.TempDir()
	// slow starts once fast has ended.
	wf := "jobs:\n  - {id: slow, run: 'echo half > slow.txt; sleep 30', outputs: [slow.txt], after: [fast]}\n" +
		"  - {id: fast, run: 'echo ok > fast.txt', outputs: [fast.txt]}\n"
	if err := os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(wf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(poolrunBin, "run", "-j", "2", "wf.yaml")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(dir, "slow.txt")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slow job did not start within a minute:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit %d, want 130\n%s", code, out.String())
	}
	if _, err := os.Lstat(filepath.Join(dir, "slow.txt")); err == nil {
		t.Error("slow.txt, the output of the interrupted job, is still there")
	}
	r := mustRun(t, dir, "run", "-n", "-v", "wf.yaml")
	if !strings.Contains(r.stdout, "skip  fast  up to date\nrun   slow  incomplete (the last run was cut off)\n") {
		t.Errorf("after the interrupted run, -n says:\n%s", r.stdout)
	}
}
