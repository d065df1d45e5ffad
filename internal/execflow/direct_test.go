package execflow_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/internal/execflow"
)

// TestPlainCommands: commands made of plain words, which run without a
// shell, end as they would through /bin/sh -c: their arguments and
// environment (PATH from Options.Env included) arrive; a program that is
// not found, is not executable, or is a script without #! gives the
// shell's message and status; and commands with shell syntax still get
// the shell.
func TestPlainCommands(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(text), mode); err != nil {
			t.Fatal(err)
		}
	}
	// A program of our own on the PATH the workflow sets; a script without
	// #!, which only a shell runs; a file that is not executable.
	write("say-args", "#!/bin/sh\nprintf '%s|' \"$0\" \"$@\" > args.txt\necho \"$POOLRUN_JOB\" > job.txt\n", 0o755)
	write("no-shebang", "echo ran > no-shebang.txt\n", 0o755)
	write("not-exec", "#!/bin/sh\necho ran\n", 0o644)
	const flow = `
jobs:
  - id: args
    run: say-args  a.b  -x=1 ,@%+
  - id: script
    run: no-shebang
  - id: missing
    run: no-such-program-anywhere arg
  - id: denied
    run: BIN/not-exec
  - id: shell
    run: echo $HOME > shell.txt
`
	work := t.TempDir()
	wf := parse(t, "plain.yaml", strings.ReplaceAll(flow, "BIN", bin))
	jobs, runErr := run(t, wf, 1, execflow.Options{Dir: work, Env: []string{"PATH=" + bin + ":" + os.Getenv("PATH")}, TailLines: 3})
	if runErr == nil {
		t.Fatal("Run succeeded; missing and denied should have failed")
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(work, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		return string(b)
	}
	if got, want := read("args.txt"), filepath.Join(bin, "say-args")+"|a.b|-x=1|,@%+|"; got != want {
		t.Errorf("say-args got %q, want %q", got, want)
	}
	if got := read("job.txt"); got != "args\n" {
		t.Errorf("POOLRUN_JOB = %q", got)
	}
	if got := read("no-shebang.txt"); got != "ran\n" {
		t.Errorf("the script without #! wrote %q", got)
	}
	if got := read("shell.txt"); got != os.Getenv("HOME")+"\n" {
		t.Errorf("echo $HOME wrote %q", got)
	}
	for id, want := range map[string]struct {
		code int
		text string
	}{"missing": {127, "not found"}, "denied": {126, "ermission denied"}} {
		_, err := jobs[id].Result()
		ce, ok := execflow.AsCommandError(err)
		if !ok {
			t.Errorf("job %s: %v, want a command error", id, err)
			continue
		}
		if ce.ExitCode != want.code || !strings.Contains(ce.StderrTail, want.text) {
			t.Errorf("job %s: exit %d, stderr %q; want %d and %q (as sh says it)", id, ce.ExitCode, ce.StderrTail, want.code, want.text)
		}
	}
	for _, id := range []string{"args", "script", "shell"} {
		if _, err := jobs[id].Result(); err != nil {
			t.Errorf("job %s: %v", id, err)
		}
	}
	if errors.Is(runErr, os.ErrNotExist) {
		t.Errorf("Run's error is the lookup's, not the command's: %v", runErr)
	}
}
