package cli

import (
	"context"
	"io"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/internal/workflow"
)

// TestForceArgs: --force takes the argument after it as its pattern
// unless that argument is the workflow file, wherever the flags stand.
func TestForceArgs(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"bare before the file", []string{"--force", "wf.yaml"}, []string{"--force", "wf.yaml"}},
		{"pattern before the file", []string{"--force", "a-*", "wf.yaml"}, []string{"--force=a-*", "wf.yaml"}},
		{"pattern after the file", []string{"wf.yaml", "--force", "a-*"}, []string{"wf.yaml", "--force=a-*"}},
		{"bare after the file", []string{"wf.yaml", "--force"}, []string{"wf.yaml", "--force"}},
		{"bare before a flag", []string{"--force", "-n", "wf.yaml"}, []string{"--force", "-n", "wf.yaml"}},
		{"two patterns, the last one the file", []string{"--force", "a", "--force", "wf.yaml"}, []string{"--force=a", "--force", "wf.yaml"}},
		{"a flag's value is no file", []string{"--report", "r.json", "--force", "wf.yaml"}, []string{"--report", "r.json", "--force", "wf.yaml"}},
		{"a shorthand's value is no file", []string{"-j", "2", "--force", "b", "wf.yaml"}, []string{"-j", "2", "--force=b", "wf.yaml"}},
		{"joined shorthands", []string{"-nj", "2", "--force", "wf.yaml"}, []string{"-nj", "2", "--force", "wf.yaml"}},
		{"joined value", []string{"-j2", "--force", "c", "wf.yaml"}, []string{"-j2", "--force=c", "wf.yaml"}},
		{"after --", []string{"--force", "a", "--", "wf.yaml"}, []string{"--force=a", "--", "wf.yaml"}},
		{"given with =", []string{"--force=a", "wf.yaml"}, []string{"--force=a", "wf.yaml"}},
		{"bare before the file and a target", []string{"--force", "wf.yaml", "report"}, []string{"--force", "wf.yaml", "report"}},
		{"bare before the file and a target, .yml", []string{"--force", "wf.yml", "report"}, []string{"--force", "wf.yml", "report"}},
		{"pattern before the file and a target", []string{"--force", "a-*", "wf.yaml", "report"}, []string{"--force=a-*", "wf.yaml", "report"}},
		{"pattern after the file and a target", []string{"wf.yaml", "report", "--force", "a-*"}, []string{"wf.yaml", "report", "--force=a-*"}},
		{"-C's value is no file", []string{"-C", "dir", "--force", "wf.yaml"}, []string{"-C", "dir", "--force", "wf.yaml"}},
		{"--set's value is no file", []string{"--set", "a=b", "--force", "x", "wf.yaml"}, []string{"--set", "a=b", "--force=x", "wf.yaml"}},
		{"a job named like a file after the file", []string{"wf.yaml", "--force", "x.yaml"}, []string{"wf.yaml", "--force=x.yaml"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var f poolFlags
			var inc incrementalFlags
			var wff workflowFlags
			fs := newFlagSet("run", "", "")
			inc.register(fs)
			wff.register(fs)
			f.register(fs)
			if got := inc.args(fs, tt.args); !slices.Equal(got, tt.want) {
				t.Errorf("args(%q) = %q, want %q", tt.args, got, tt.want)
			}
		})
	}
}

// TestFlagsAnywhere: flags parse before and after the arguments, joined to
// their value or apart, in long and short forms.
func TestFlagsAnywhere(t *testing.T) {
	for _, args := range [][]string{
		{"-j2", "wf.yaml", "-n"},
		{"wf.yaml", "-j", "2", "--dry-run"},
		{"--jobs=2", "-n", "wf.yaml"},
		{"wf.yaml", "--jobs", "2", "--dry-run=true"},
		{"-nj2", "wf.yaml"},
	} {
		var f poolFlags
		var inc incrementalFlags
		fs := newFlagSet("run", "", "")
		inc.register(fs)
		f.register(fs)
		if err := parseFlags(fs, args, io.Discard); err != nil {
			t.Errorf("%q: %v", args, err)
			continue
		}
		if f.jobs != 2 || !inc.dryRun || !slices.Equal(fs.Args(), []string{"wf.yaml"}) {
			t.Errorf("%q: -j %d, -n %v, arguments %q; want 2, true, [wf.yaml]", args, f.jobs, inc.dryRun, fs.Args())
		}
	}
}

// TestFlagMistakes: a mistake is one line, exit status 2, that names the
// flag as typed and points to the command's help.
func TestFlagMistakes(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--foo", "wf.yaml"}, "poolrun run: unknown flag --foo; see 'poolrun help run'"},
		{[]string{"run", "wf.yaml", "-force"}, "poolrun run: unknown flag -force (a long flag takes two dashes: --force); see 'poolrun help run'"},
		{[]string{"run", "-x", "wf.yaml"}, "poolrun run: unknown flag -x; see 'poolrun help run'"},
		{[]string{"run", "wf.yaml", "-j"}, "poolrun run: -j needs a value; see 'poolrun help run'"},
		{[]string{"run", "wf.yaml", "--report"}, "poolrun run: --report needs a value; see 'poolrun help run'"},
		{[]string{"run", "-j", "two", "wf.yaml"}, "poolrun run: -j two: want a whole number; see 'poolrun help run'"},
		{[]string{"run", "--tag=maybe", "wf.yaml"}, "poolrun run: --tag maybe: want true or false; see 'poolrun help run'"},
		{[]string{"run"}, "poolrun run: no workflow file given, and no poolrun.yaml here; see 'poolrun help run'"},
		{[]string{"run", "--set", "x", "wf.yaml"}, "poolrun run: --set x: want NAME=VALUE, with an =; see 'poolrun help run'"},
		{[]string{"run", "-C", "/no/such/folder", "wf.yaml"}, "poolrun run: -C /no/such/folder: no such file or directory"},
		{[]string{"scaffold", "--scale", "big"}, "poolrun scaffold: --scale big: want a number; see 'poolrun help scaffold'"},
		{[]string{"-quiet"}, "poolrun scaffold: unknown flag -quiet (a long flag takes two dashes: --quiet); see 'poolrun help scaffold'"},
		{[]string{"bench", "extra"}, `poolrun bench: unexpected argument "extra"; see 'poolrun help bench'`},
		{[]string{"report", "-o"}, "poolrun report: -o needs a value; see 'poolrun help report'"},
		{[]string{"report", "a.json", "b.json"}, `poolrun report: want one report file, got "a.json" and "b.json"; see 'poolrun help report'`},
		{[]string{"worker", "--join-file"}, "poolrun worker: --join-file needs a value; see 'poolrun help worker'"},
		{[]string{"worker"}, "poolrun worker: --join-file: give the pool's join file; see 'poolrun help worker'"},
		{[]string{"inspect", "--pid", "1"}, "poolrun inspect: unknown flag --pid; see 'poolrun help inspect'"},
		{[]string{"frobnicate"}, `poolrun: unknown command "frobnicate"; see 'poolrun help'`},
		{[]string{"version", "now"}, `poolrun version: want no arguments, got "now"; see 'poolrun help'`},
	} {
		var stdout, stderr strings.Builder
		err := Main(context.Background(), tt.args, &stdout, &stderr)
		if err == nil || ExitCode(err) != ExitBadInput || err.Error() != tt.want {
			t.Errorf("poolrun %q: %v (exit %d)\nwant %s (exit 2)", tt.args, err, ExitCode(err), tt.want)
		}
		if stdout.Len() > 0 || stderr.Len() > 0 {
			t.Errorf("poolrun %q printed %q and %q; want only the error", tt.args, stdout.String(), stderr.String())
		}
	}
}

// TestHelpLayout: every command's help starts with its synopsis line and a
// paragraph, then lists the flags, on standard output.
func TestHelpLayout(t *testing.T) {
	for _, cmd := range []string{"run", "scaffold", "bench", "report", "worker", "inspect", "completion"} {
		var stdout strings.Builder
		if err := Main(context.Background(), []string{"help", cmd}, &stdout, io.Discard); err != nil {
			t.Fatalf("poolrun help %s: %v", cmd, err)
		}
		parts := strings.SplitN(stdout.String(), "\n\n", 4)
		if len(parts) < 4 || !strings.HasPrefix(parts[0], "Usage: poolrun "+cmd) || strings.Count(parts[0], "\n") > 1 ||
			strings.HasPrefix(parts[1], " ") || !strings.HasPrefix(parts[2], "Flags:\n") || !strings.Contains(parts[2], "  -h, --help\n") {
			t.Errorf("poolrun help %s: want the synopsis, a paragraph, then the flags; got\n%s", cmd, stdout.String())
		}
		for _, l := range strings.Split(parts[2], "\n") {
			if len([]rune(l)) > 80 {
				t.Errorf("poolrun help %s: a flag's line is wider than 80 columns: %q", cmd, l)
			}
		}
	}
}

// tableKey is a key in the table of workflowFields: an indented word
// followed by a colon, after an optional "- ".
var tableKey = regexp.MustCompile(`(?m)^ +(?:- )?([a-z_]+|NAME):`)

// TestWorkflowFields: the table in poolrun run's help lists exactly the
// keys that package workflow takes: those its errors list for a job, an
// item and the file.
func TestWorkflowFields(t *testing.T) {
	var help strings.Builder
	if err := Main(context.Background(), []string{"help", "run"}, &help, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(help.String(), workflowFields) {
		t.Fatalf("poolrun help run lacks the workflow fields:\n%s", help.String())
	}
	table := map[string]bool{}
	for _, m := range tableKey.FindAllStringSubmatch(workflowFields, -1) {
		table[m[1]] = true
	}
	delete(table, "NAME")
	// What the parser says each level takes, when given a key it does not.
	wf := "workers:\n  py: {run: x, zz: 1}\nitems:\n  ref: {run: x, zz: 1}\njobs:\n  - {id: a, run: x, zz: 1}\nzz: 1\n"
	_, err := workflow.Parse("wf.yaml", []byte(wf))
	if err == nil {
		t.Fatal("a workflow of unknown fields parsed")
	}
	said := map[string]bool{}
	for _, m := range regexp.MustCompile(`\((?:a workflow|an item|a job|a worker) has (?:only )?([^)]*)\)`).FindAllStringSubmatch(err.Error(), -1) {
		for _, k := range strings.FieldsFunc(strings.NewReplacer(" and ", ",", " or ", ",").Replace(m[1]), func(r rune) bool { return r == ',' || r == ' ' }) {
			said[k] = true
		}
	}
	if len(said) == 0 {
		t.Fatalf("the parser's errors list no fields: %v", err)
	}
	for k := range said {
		if !table[k] {
			t.Errorf("the table lacks %q, which the parser takes", k)
		}
	}
	for k := range table {
		if !said[k] {
			t.Errorf("the table lists %q, which the parser does not take", k)
		}
	}
}

// TestFormatVersion: the version line gives the module's version, the
// commit and its state where the build recorded them, and the toolchain.
func TestFormatVersion(t *testing.T) {
	platform := " " + runtime.GOOS + "/" + runtime.GOARCH
	for _, tt := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"nothing known", nil, "poolrun (devel) " + runtime.Version() + platform},
		{"a tagged module", &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v1.2.3"}}, "poolrun v1.2.3 go1.99" + platform},
		{"a checkout", &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		}}, "poolrun (devel) (commit 0123456789ab, 2026-12-01T10:00:00Z, modified) go1.99" + platform},
		{"a clean checkout", &debug.BuildInfo{GoVersion: "go1.99", Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"},
		}}, "poolrun (devel) (commit abc) go1.99" + platform},
	} {
		if got := formatVersion(tt.bi); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	for _, args := range [][]string{{"--version"}, {"version"}} {
		var stdout strings.Builder
		if err := Main(context.Background(), args, &stdout, io.Discard); err != nil || stdout.String() != versionLine()+"\n" {
			t.Errorf("poolrun %q: %v, %q; want %q", args, err, stdout.String(), versionLine())
		}
	}
}
