// Package cli is the poolrun command: its subcommands, flags, progress
// display and reports. cmd/poolrun only sets up signals and calls [Main].
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit statuses.
const (
	ExitOK          = 0
	ExitJobsFailed  = 1
	ExitBadInput    = 2
	ExitInterrupted = 130
)

// exitError carries the exit status an error should end the program with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// badInput marks err as bad usage or input (exit status 2).
func badInput(err error) error { return &exitError{ExitBadInput, err} }

// badInputf is badInput of a formatted error.
func badInputf(format string, args ...any) error {
	return badInput(fmt.Errorf(format, args...))
}

// ExitCode is the exit status for err: 0 for nil, 130 when the run was
// interrupted, 2 for bad usage or input, 1 for anything else (jobs failed).
func ExitCode(err error) int {
	var e *exitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &e):
		return e.code
	case errors.Is(err, context.Canceled):
		return ExitInterrupted
	default:
		return ExitJobsFailed
	}
}

const usage = `poolrun runs a graph of jobs on a pool of worker processes on this host.
Jobs declare the expensive in-memory items they need; each worker builds an
item once, keeps it while any unfinished job in the pool needs it, and frees
it the moment none does.

Usage:
  poolrun [flags]               the embedded scaffold workload (as "poolrun scaffold")
  poolrun scaffold [flags]      build a scaffold of cells and connections
  poolrun run [flags] FILE      run a YAML workflow of shell commands
  poolrun inspect PID           print the window of a running pool
  poolrun bench [flags]         the scaffold workload in each way of holding items, side by side
  poolrun report FILE.json      an HTML page of a run's --report: timelines, cache, totals
  poolrun worker --join-file F  join a pool started with --listen, from this host or another
  poolrun help [COMMAND]        help on a command

Run "poolrun help COMMAND" (or "poolrun COMMAND --help") for its flags and an
example. Exit status: 0 all jobs succeeded, 1 some job failed, 2 bad usage or
input, 130 interrupted.
`

// Main runs the poolrun command with args (without the program name) and
// returns its error; [ExitCode] turns that into the exit status. Standard
// output gets results and reports, standard error progress and messages.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && !isHelp(args[0]) {
		return runScaffold(ctx, args, stdout, stderr)
	}
	switch cmd, rest := args[0], args[1:]; {
	case cmd == "scaffold":
		return runScaffold(ctx, rest, stdout, stderr)
	case cmd == "run":
		return runWorkflow(ctx, rest, stdout, stderr)
	case cmd == "inspect":
		return runInspect(ctx, rest, stdout, stderr)
	case cmd == "bench":
		return runBench(ctx, rest, stdout, stderr)
	case cmd == "report":
		return runReport(ctx, rest, stdout, stderr)
	case cmd == "worker":
		return runWorker(ctx, rest, stdout, stderr)
	case cmd == "help" || isHelp(cmd):
		if len(rest) > 0 && rest[0] != "help" {
			return Main(ctx, []string{rest[0], "--help"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return badInputf("poolrun: unknown command %q", cmd)
	}
}

// isHelp reports whether the argument a asks for help as package flag
// takes it: -h, -help, --h or --help, with or without =value.
func isHelp(a string) bool {
	name, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
	return strings.HasPrefix(a, "-") && (name == "h" || name == "help")
}

// newFlagSet makes a flag set whose usage prints text and then the flags.
func newFlagSet(name, text string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), text)
		fmt.Fprintln(fs.Output(), "\nFlags:")
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; --help prints the usage to stdout and returns
// errHelp, which Main's callers treat as success.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	for _, a := range args {
		if a == "--" {
			break
		}
		if isHelp(a) {
			fs.SetOutput(stdout)
			fs.Usage()
			return errHelp
		}
	}
	if err := fs.Parse(args); err != nil {
		return badInput(fmt.Errorf("poolrun %s: %w", fs.Name(), err))
	}
	return nil
}

// errHelp ends a command that only printed its help.
var errHelp = errors.New("help printed")
