package main_test

import (
	"debug/buildinfo"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// flagsWorkflow has three jobs that each append their id to ran.log and
// write an output.
const flagsWorkflow = `jobs:
  - id: a-${i}
    foreach: {i: 1..3}
    run: echo a-${i} >> ran.log && touch out-${i}
    outputs: ["out-${i}"]
`

// TestFlagsAfterFile: flags may follow the workflow file, and one-letter
// flags take their value joined (-j2) or apart (-j 2), as the long form
// (--jobs=2) does: the report says the pool ran 2 workers.
func TestFlagsAfterFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(flagsWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	r := poolrun(t, dir, "run", "wf.yaml", "-n")
	if r.code != 0 || !strings.Contains(r.stdout, "a-1") || ran(t, dir) != nil {
		t.Fatalf("poolrun run wf.yaml -n: exit %d, ran %q\n%s%s", r.code, ran(t, dir), r.stdout, r.stderr)
	}
	for _, args := range [][]string{
		{"wf.yaml", "-j2", "--quiet", "--force", "--report", "r.json"},
		{"-j", "2", "wf.yaml", "--quiet", "--force=a-*", "--report=r.json"},
		{"--jobs=2", "--quiet", "--report", "r.json", "wf.yaml", "--force", "a-*"},
	} {
		r := poolrun(t, dir, append([]string{"run"}, args...)...)
		if r.code != 0 {
			t.Fatalf("poolrun run %q: exit %d\n%s", args, r.code, r.stderr)
		}
		if got := ran(t, dir); len(got) != 3 {
			t.Errorf("poolrun run %q ran %q, want the 3 jobs (forced)", args, got)
		}
		data, err := os.ReadFile(filepath.Join(dir, "r.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Options struct{ Workers int }
		}
		if err := json.Unmarshal(data, &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Options.Workers != 2 {
			t.Errorf("poolrun run %q: the report says %d workers, want 2", args, rep.Options.Workers)
		}
		os.Remove(filepath.Join(dir, "r.json"))
	}
}

// TestBadFlagOneLine: a bad flag gets one line on standard error that
// names it and points to the command's help, exit status 2, and nothing
// on standard output; the help itself goes to standard output, status 0.
func TestBadFlagOneLine(t *testing.T) {
	dir := t.TempDir()
	for _, cmd := range []string{"run", "scaffold", "bench", "report", "worker", "inspect"} {
		r := poolrun(t, dir, cmd, "--foo", "x")
		want := "poolrun " + cmd + ": unknown flag --foo; see 'poolrun help " + cmd + "'\n"
		if r.code != 2 || r.stderr != want || r.stdout != "" {
			t.Errorf("poolrun %s --foo x: exit %d, stderr %q, stdout %q; want 2 and %q", cmd, r.code, r.stderr, r.stdout, want)
		}
		for _, args := range [][]string{{"help", cmd}, {cmd, "--help"}, {cmd, "x", "-h"}} {
			r := poolrun(t, dir, args...)
			if r.code != 0 || r.stderr != "" || !strings.HasPrefix(r.stdout, "Usage: poolrun "+cmd) {
				t.Errorf("poolrun %q: exit %d, stderr %q; want 0 and the help on standard output, which starts:\n%.200s", args, r.code, r.stderr, r.stdout)
			}
		}
	}
	r := poolrun(t, dir, "run", "wf.yaml", "-force")
	if want := "poolrun run: unknown flag -force (a long flag takes two dashes: --force); see 'poolrun help run'\n"; r.code != 2 || r.stderr != want {
		t.Errorf("poolrun run wf.yaml -force: exit %d, stderr %q; want 2 and %q", r.code, r.stderr, want)
	}
	r = poolrun(t, dir, "help", "run")
	for _, want := range []string{"Workflow fields", "items:", "jobs:", "- id:", "after:", "needs:", "inputs:", "outputs:", "foreach:", "timeout:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("poolrun help run lacks %q", want)
		}
	}
}

// TestVersion: poolrun --version and poolrun version print one line with
// the module's version and toolchain, and the commit where the build
// recorded one.
func TestVersion(t *testing.T) {
	bi, err := buildinfo.ReadFile(poolrunBin)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"poolrun " + bi.Main.Version + " ", bi.GoVersion}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			want = append(want, "commit "+s.Value[:min(12, len(s.Value))])
		}
	}
	var first string
	for _, args := range [][]string{{"--version"}, {"version"}} {
		r := poolrun(t, t.TempDir(), args...)
		if r.code != 0 || r.stderr != "" || strings.Count(r.stdout, "\n") != 1 {
			t.Errorf("poolrun %q: exit %d, stdout %q, stderr %q; want 0 and one line", args, r.code, r.stdout, r.stderr)
		}
		for _, w := range want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("poolrun %q: %q lacks %q", args, r.stdout, w)
			}
		}
		if first == "" {
			first = r.stdout
		} else if r.stdout != first {
			t.Errorf("poolrun version said %q, poolrun --version %q", r.stdout, first)
		}
	}
}
