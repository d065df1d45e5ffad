package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// badInputCommands are the commands whose flags FuzzFlags parses, by the
// fuzzer's number mod 3.
var badInputCommands = []string{"run", "scaffold", "bench"}

// A flagsProbe runs the commands on arguments that are refused before
// anything runs, whatever the flags: run's workflow file is sure to fail
// its checks (a job after one that does not exist), and scaffold and
// bench get a --config that does not exist after the flags under test
// (the last --config wins; anything that stops the flags earlier makes
// that --config an argument, which the commands refuse). Each command
// checks its flags before it reads the file, so this parses the flags and
// runs nothing; the probe's working folder stays empty if so.
type flagsProbe struct {
	work     string // the working folder, where nothing may appear
	workflow string // run's workflow file, rewritten for each foreach range
	missing  string // the --config of scaffold and bench, which does not exist
}

// newFlagsProbe makes the probe's folders.
func newFlagsProbe(tb testing.TB) *flagsProbe {
	files := tb.TempDir()
	return &flagsProbe{
		work:     tb.TempDir(),
		workflow: filepath.Join(files, "wf.yaml"),
		missing:  filepath.Join(files, "missing.yaml"),
	}
}

// guardedWorkflow is run's workflow: foreach gets the range under test,
// and whatever it gives, job "a" runs after a job that does not exist
// (line 5), so the workflow never runs.
const guardedWorkflow = "jobs:\n  - id: a-${i}\n    foreach: {i: %s}\n    run: 'true'\n    after: [no-such-job]\n"

// run runs command (one of badInputCommands) on args, with foreach as the
// range of run's workflow, in the probe's working folder (for tb only: the
// fuzzing process writes its findings under the package's folder), and
// returns the arguments given to Main and its error.
func (p *flagsProbe) run(tb testing.TB, command string, args []string, foreach string) ([]string, error) {
	tb.Helper()
	tb.Chdir(p.work)
	full := append([]string{command}, args...)
	if command == "run" {
		// Only what a range can hold, so that the file stays the same
		// YAML around it, with its guard.
		if strings.Trim(foreach, "0123456789.+-") != "" || foreach == "" {
			foreach = "1..3"
		}
		if err := os.WriteFile(p.workflow, []byte(strings.Replace(guardedWorkflow, "%s", foreach, 1)), 0o600); err != nil {
			tb.Fatal(err)
		}
		full = append(full, p.workflow)
	} else {
		full = append(full, "--config", p.missing)
	}
	// A pool that started anyway would end at once, with context.Canceled.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return full, Main(ctx, full, io.Discard, io.Discard)
}

// check checks what the probe's run of args gave: success only for help
// (or --print-config), else exit status 2 and a message that names one of
// the arguments or flags, or the file at fault; and nothing in the working
// folder.
func (p *flagsProbe) check(tb testing.TB, err error, args []string) {
	tb.Helper()
	if entries, _ := os.ReadDir(p.work); len(entries) > 0 {
		tb.Fatalf("poolrun %q: %s appeared in the working folder: something ran", args, entries[0].Name())
	}
	if err == nil {
		if !helpOrConfigAsked(args) {
			tb.Fatalf("poolrun %q: no error, and no help was asked for", args)
		}
		return
	}
	if code := ExitCode(err); code != ExitBadInput {
		tb.Fatalf("poolrun %q: exit status %d, want %d: %v", args, code, ExitBadInput, err)
	}
	if !namesInput(err.Error(), args) {
		tb.Fatalf("poolrun %q: the message names no flag, argument or file: %v", args, err)
	}
}

// helpOrConfigAsked reports whether args (a command and its arguments)
// ask for help or the configuration, before any "--".
func helpOrConfigAsked(args []string) bool {
	for _, a := range args[1:] {
		if a == "--" {
			return false
		}
		if isHelp(a) || strings.HasPrefix(a, "--print-config") {
			return true
		}
	}
	return false
}

// namesInput reports whether msg names something of args: a flag (-name
// or --name, given as -name, --name or --name=value), an argument as
// given, or what it says of the number of arguments.
func namesInput(msg string, args []string) bool {
	if strings.Contains(msg, " argument") {
		return true
	}
	for _, a := range args[1:] {
		if len(a) >= 2 && strings.Contains(msg, a) {
			return true
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name != "" && strings.Contains(msg, "-"+name) {
			return true
		}
	}
	return false
}

// FuzzFlags feeds the run, scaffold and bench commands arbitrary arguments
// (separated by NUL bytes in args) and, for run, an arbitrary foreach
// range: whatever they are, the command runs nothing, and either prints
// its help or ends with exit status 2 and a message that names the flag,
// the argument or the file and line at fault. The seeds are the cases of
// TestBadFlags and, in testdata/fuzz/FuzzFlags, combinations of flags
// (command 0 is run, 1 scaffold, 2 bench).
func FuzzFlags(f *testing.F) {
	for _, c := range badFlags {
		for _, cmd := range c.commands {
			f.Add(commandNumber(cmd), strings.Join(c.args, "\x00"), c.foreach)
		}
	}
	p := newFlagsProbe(f)
	f.Fuzz(func(t *testing.T, cmd uint8, args, foreach string) {
		var list []string
		if args != "" {
			list = strings.Split(args, "\x00")
		}
		full, err := p.run(t, badInputCommands[int(cmd)%len(badInputCommands)], list, foreach)
		p.check(t, err, full)
	})
}

func commandNumber(cmd string) uint8 {
	for i, c := range badInputCommands {
		if c == cmd {
			return uint8(i)
		}
	}
	panic("no command " + cmd)
}

// badFlags are the values out of range (and a few other mistakes) that
// TestBadFlags checks and FuzzFlags starts from.
var badFlags = []struct {
	name     string
	commands []string // badInputCommands that take the flags
	args     []string
	foreach  string // run's range; "" for 1..3
	want     string // in the error; "FILE" stands for run's workflow file
}{
	{"negative -j", []string{"run", "scaffold", "bench"}, []string{"-j", "-1"}, "", "-j -1"},
	{"-j not a number", []string{"run", "scaffold", "bench"}, []string{"-j", "two"}, "", "-j two: want a whole number"},
	{"-j beyond int", []string{"run", "scaffold", "bench"}, []string{"-j", "99999999999999999999"}, "", "-j 99999999999999999999: value out of range"},
	{"capacity 0", []string{"run", "scaffold", "bench"}, []string{"--capacity", "0"}, "", "--capacity 0: want a number of slots from 1 to 16777216"},
	{"capacity too large", []string{"run", "scaffold", "bench"}, []string{"--capacity=100000000"}, "", "--capacity 100000000"},
	{"scale 1e9", []string{"scaffold", "bench"}, []string{"--scale", "1e9"}, "", "--scale 1e+09: want a factor above 0 and at most 1000"},
	{"scale 0", []string{"scaffold", "bench"}, []string{"--scale", "0"}, "", "--scale 0:"},
	{"negative scale", []string{"scaffold", "bench"}, []string{"--scale", "-2"}, "", "--scale -2:"},
	{"scale NaN", []string{"scaffold", "bench"}, []string{"--scale", "NaN"}, "", "--scale NaN:"},
	{"scale infinite", []string{"scaffold", "bench"}, []string{"--scale", "+Inf"}, "", "--scale +Inf:"},
	{"negative cache budget", []string{"run", "scaffold", "bench"}, []string{"--cache-budget", "-1MiB"}, "", "--cache-budget -1MiB: want bytes"},
	{"unknown eviction policy", []string{"run", "scaffold"}, []string{"--evict", "sometimes"}, "", "--evict sometimes: want one of"},
	{"report in a missing folder", []string{"run", "scaffold", "bench"}, []string{"--report", "/nonexistent-poolrun-folder/r.json"}, "", "--report /nonexistent-poolrun-folder/r.json"},
	{"report is a folder", []string{"run", "scaffold", "bench"}, []string{"--report", "/"}, "", "--report /:"},
	{"unknown flag", []string{"run", "scaffold", "bench"}, []string{"--frobnicate"}, "", "unknown flag --frobnicate; see 'poolrun help "},
	{"negative workers", []string{"bench"}, []string{"--workers", "2,-1"}, "", `--workers "2,-1"`},
	{"zero repeats", []string{"bench"}, []string{"--repeat", "0"}, "", "--repeat 0"},
	{"too many repeats", []string{"bench"}, []string{"--repeat", "1001"}, "", "--repeat 1001: want a number of runs from 1 to 1000"},
	{"-j too large", []string{"run", "scaffold", "bench"}, []string{"-j", "4097"}, "", "-j 4097: want a number of workers from 1 to 4096"},
	{"too many workers", []string{"bench"}, []string{"--workers", "2,5000"}, "", `--workers "2,5000"`},
	{"backwards foreach range", []string{"run"}, nil, "8..1", `FILE:3: job "a-${i}": foreach variable "i": bad range "8..1": the start is greater than the end`},
	{"negative foreach range", []string{"run"}, nil, "-5..-9", `FILE:3: job "a-${i}": foreach variable "i": bad range "-5..-9"`},
	{"absurd foreach range", []string{"run"}, nil, "1..1000000000", `FILE:3: job "a-${i}": foreach variable "i": range "1..1000000000" has more than 10000000 values`},
	{"foreach range beyond int64", []string{"run"}, nil, "0..99999999999999999999", `FILE:3: job "a-${i}": foreach variable "i": bad range "0..99999999999999999999": number out of range`},
	{"good flags, guarded workflow", []string{"run"}, []string{"-j", "2", "--capacity", "16777216"}, "1..100000", `FILE:5: job "a-1": after "no-such-job": no such job`},
	{"dry run, guarded workflow", []string{"run"}, []string{"-n"}, "", `FILE:5: job "a-1": after "no-such-job": no such job`},
	{"dag, guarded workflow", []string{"run"}, []string{"--dag"}, "", `FILE:5: job "a-1": after "no-such-job": no such job`},
	{"force, guarded workflow", []string{"run"}, []string{"--force"}, "", `FILE:5: job "a-1": after "no-such-job": no such job`},
	{"force a glob, guarded workflow", []string{"run"}, []string{"--force=a-*", "--retries", "3", "--timeout", "1s"}, "", `FILE:5: job "a-1": after "no-such-job": no such job`},
	{"dry run and dag", []string{"run"}, []string{"-n", "--dag"}, "", "-n (--dry-run) and --dag"},
}

// TestBadFlags: each value out of range is refused with exit status 2 and
// a message that names the flag and the value, or the file and line,
// before anything runs.
func TestBadFlags(t *testing.T) {
	p := newFlagsProbe(t)
	for _, c := range badFlags {
		for _, cmd := range c.commands {
			t.Run(cmd+"/"+c.name, func(t *testing.T) {
				full, err := p.run(t, cmd, c.args, c.foreach)
				p.check(t, err, full)
				if want := strings.ReplaceAll(c.want, "FILE", p.workflow); !strings.Contains(err.Error(), want) {
					t.Errorf("poolrun %q: %v\nwant a message with %s", full, err, want)
				}
			})
		}
	}
	// Valid flags reach the file, which is what is refused.
	for _, cmd := range []string{"scaffold", "bench"} {
		full, err := p.run(t, cmd, []string{"-j", "1", "--scale", "0.5"}, "")
		p.check(t, err, full)
		if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), p.missing) {
			t.Errorf("poolrun %q: %v, want the missing configuration named", full, err)
		}
	}
}

// TestHelpForms: every form of the help flag prints the help, on
// standard output, with success, wherever it stands among the arguments
// and whatever mistakes stand beside it.
func TestHelpForms(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"-help"}, {"run", "--help"}, {"run", "-h", "wf.yaml"},
		{"run", "wf.yaml", "--help"}, {"run", "-nh", "wf.yaml"}, {"run", "--frobnicate", "--help"},
		{"scaffold", "--help=true"}, {"bench", "-j", "2", "-h"}, {"help", "run"}, {"worker", "-h"},
	} {
		var stdout strings.Builder
		if err := Main(context.Background(), args, &stdout, io.Discard); err != nil || !strings.HasPrefix(stdout.String(), "Usage: poolrun") {
			t.Errorf("poolrun %q: %v, and standard output %q; want the help", args, err, stdout.String())
		}
	}
	for _, a := range []string{"-", "--", "---h", "-hh", "--helpme", "h", "--h", "--help=false", "--help=x"} {
		if isHelp(a) {
			t.Errorf("isHelp(%q) = true", a)
		}
	}
}
