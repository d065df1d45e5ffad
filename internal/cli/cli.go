// Package cli is the poolrun command: its subcommands, flags, progress
// display and reports. cmd/poolrun only sets up signals and calls [Main].
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
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

const usage = `Usage: poolrun COMMAND [flags] [ARGUMENTS]

poolrun runs a graph of jobs on a pool of worker processes on this host.
Jobs declare the expensive in-memory items they need; each worker builds an
item once, keeps it while any unfinished job in the pool needs it, and frees
it the moment none does.

Commands:
  poolrun [flags]               the embedded scaffold workload (as "poolrun scaffold")
  poolrun scaffold [flags]      build a scaffold of cells and connections
  poolrun run [flags] [FILE]    run a YAML workflow of shell commands (default poolrun.yaml)
  poolrun inspect PID           print the window of a running pool
  poolrun bench [flags]         the scaffold workload in each way of holding items, side by side
  poolrun report FILE.json      an HTML page of a run's --report: timelines, cache, totals
  poolrun worker --join-file F  join a pool started with --listen, from this host or another
  poolrun version               the version of this poolrun (also: poolrun --version)
  poolrun completion SHELL      completion of poolrun's words for bash, zsh or fish
  poolrun help [COMMAND]        help on a command

Flags may come before or after a command's arguments; -j2, -j 2, --jobs 2
and --jobs=2 are the same, and a flag of more than one letter takes two
dashes. Run "poolrun help COMMAND" (or "poolrun COMMAND --help") for its
flags and an example.

Exit status: 0 all jobs succeeded, 1 some job failed, 2 bad usage or input,
130 interrupted.
`

// Main runs the poolrun command with args (without the program name) and
// returns its error; [ExitCode] turns that into the exit status. Standard
// output gets results and reports, standard error progress and messages.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "version") {
		if len(args) > 1 {
			return badInputf("poolrun %s: want no arguments, got %q; see 'poolrun help'", args[0], args[1])
		}
		fmt.Fprintln(stdout, versionLine())
		return nil
	}
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
	case cmd == "completion":
		return runCompletion(ctx, rest, stdout)
	case cmd == "help" || isHelp(cmd):
		if len(rest) > 0 && rest[0] == "version" {
			fmt.Fprint(stdout, versionUsage)
			return nil
		}
		if len(rest) > 0 && rest[0] != "help" {
			return Main(ctx, []string{rest[0], "--help"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return nil
	default:
		return badInputf("poolrun: unknown command %q; see 'poolrun help'", cmd)
	}
}

// newFlagSet makes the flag set of command name, whose help (--help,
// poolrun help NAME) is head (the synopsis line and a paragraph), then the
// flags, then tail (the rest of the story, and examples). Flags may come
// before and after the arguments; the errors of parsing are worded by
// parseFlags.
func newFlagSet(name, head, tail string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolP("help", "h", false, "print this help")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprint(w, head)
		fmt.Fprintf(w, "\nFlags:\n%s", flagUsages(fs))
		if tail != "" {
			fmt.Fprint(w, "\n"+tail)
		}
	}
	return fs
}

// flagUsages lists the flags of fs as package flag does, each flag's
// names on a line and its text under them, wrapped to fit a terminal of
// 80 columns: pflag's own table puts the texts in a column too narrow for
// their length.
func flagUsages(fs *pflag.FlagSet) string {
	var b strings.Builder
	fs.VisitAll(func(fl *pflag.Flag) {
		if fl.Shorthand != "" {
			fmt.Fprintf(&b, "  -%s, --%s", fl.Shorthand, fl.Name)
		} else {
			fmt.Fprintf(&b, "      --%s", fl.Name)
		}
		name, text := pflag.UnquoteUsage(fl)
		switch {
		case fl.Value.Type() == "bool":
		case fl.NoOptDefVal != "":
			fmt.Fprintf(&b, "[=%s]", name)
		default:
			fmt.Fprintf(&b, " %s", name)
		}
		switch fl.DefValue {
		case "", "0", "0s", "false", "[]":
		default:
			text += fmt.Sprintf(" (default %s)", fl.DefValue)
		}
		b.WriteString("\n")
		b.WriteString(wrapText(text, "        ", 80))
	})
	return b.String()
}

// wrapText breaks text into lines of at most width columns (longer words
// stand alone), each line starting with indent.
func wrapText(text, indent string, width int) string {
	var b strings.Builder
	line := indent
	for _, word := range strings.Fields(text) {
		if line != indent && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += word
	}
	b.WriteString(line + "\n")
	return b.String()
}

// parseFlags parses args. Help asked for anywhere before "--" wins over
// any mistake: it prints the usage to stdout and returns errHelp, which
// the commands treat as success. A mistake is an error of one line that
// points to the command's help (exit status 2).
func parseFlags(fs *pflag.FlagSet, args []string, stdout io.Writer) error {
	err := fs.Parse(args)
	help, _ := fs.GetBool("help")
	if help || helpAsked(args) {
		fs.SetOutput(stdout)
		fs.Usage()
		return errHelp
	}
	if err != nil {
		return usageError(fs, flagMistake(fs, err))
	}
	return nil
}

// helpAsked reports whether an argument before "--" asks for help.
func helpAsked(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if isHelp(a) {
			return true
		}
	}
	return false
}

// isHelp reports whether the argument a asks for help: -h, --help or
// --help=true (or another true value of strconv.ParseBool), or -help,
// the one long flag whose single dash is forgiven.
func isHelp(a string) bool {
	if a == "-h" || a == "-help" || a == "--help" {
		return true
	}
	v, ok := strings.CutPrefix(a, "--help=")
	b, err := strconv.ParseBool(v)
	return ok && err == nil && b
}

// usageError is the error of a mistake in a command's arguments: one line
// that says what is wrong and where to read how it is done.
func usageError(fs *pflag.FlagSet, msg string) error {
	return badInputf("poolrun %s: %s; see 'poolrun help %s'", fs.Name(), msg, fs.Name())
}

// flagMistake words an error of pflag's parser as a short phrase that
// names the flag as it was typed.
func flagMistake(fs *pflag.FlagSet, err error) string {
	var (
		unknown  *pflag.NotExistError
		noValue  *pflag.ValueRequiredError
		badValue *pflag.InvalidValueError
		syntax   *pflag.InvalidSyntaxError
	)
	switch {
	case errors.As(err, &unknown):
		group, _, _ := strings.Cut(unknown.GetSpecifiedShortnames(), "=")
		switch {
		case group == "":
			return "unknown flag --" + unknown.GetSpecifiedName()
		case len(group) > 1 && fs.Lookup(group) != nil:
			return fmt.Sprintf("unknown flag -%s (a long flag takes two dashes: --%s)", group, group)
		case len(group) > 1:
			return fmt.Sprintf("unknown flag -%s in -%s", unknown.GetSpecifiedName(), group)
		default:
			return "unknown flag -" + group
		}
	case errors.As(err, &noValue):
		if noValue.GetSpecifiedShortnames() != "" {
			return fmt.Sprintf("-%s needs a value", noValue.GetSpecifiedName())
		}
		return fmt.Sprintf("--%s needs a value", noValue.GetSpecifiedName())
	case errors.As(err, &badValue):
		fl := badValue.GetFlag()
		name := "--" + fl.Name
		if fl.Shorthand != "" {
			name = "-" + fl.Shorthand
		}
		value := badValue.GetValue()
		shown := value
		if shown == "" {
			shown = `""`
		}
		return fmt.Sprintf("%s %s: %s", name, shown, valueMistake(fl, value, errors.Unwrap(err)))
	case errors.As(err, &syntax):
		return "bad flag syntax " + syntax.GetSpecifiedFlag()
	}
	return err.Error()
}

// valueMistake words why value was refused for fl: what fl's own Set
// said, or for pflag's numbers and booleans what a value looks like.
func valueMistake(fl *pflag.Flag, value string, cause error) string {
	typ := fl.Value.Type()
	switch {
	case typ == "bool":
		return "want true or false"
	case strings.HasPrefix(typ, "int") || strings.HasPrefix(typ, "uint"):
		if digits := strings.TrimLeft(value, "+-"); digits != "" && strings.Trim(digits, "0123456789") == "" {
			return "value out of range"
		}
		return "want a whole number"
	case strings.HasPrefix(typ, "float"):
		return "want a number"
	case cause != nil:
		return cause.Error()
	}
	return "bad value"
}

// errHelp ends a command that only printed its help.
var errHelp = errors.New("help printed")
