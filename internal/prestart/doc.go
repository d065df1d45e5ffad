// Package prestart does, while a poolrun program is being initialised, the
// two things that need nothing but its arguments and environment and that
// would otherwise wait for the rest of its initialisation: some 15 ms on
// a small machine (GODEBUG=inittrace=1: this package's init runs 6-8 ms
// after the start, main 22 ms after it), most of it the packages of the
// cluster transport.
//
// A program imports it for that alone, as cmd/poolrun does:
//
//	import _ "github.com/poolrun/poolrun/internal/prestart"
//
// Its init runs right after package os's, before the heavy packages (Go
// initialises a package as soon as what it imports is, in the order of
// import paths), and does one of:
//
//   - In poolrun run's janitor (the program re-executed with
//     [JanitorEnv] set and a pipe on its standard input; see
//     execflow.StartJanitor), it waits there for the end of its input. If
//     poolrun dismissed it, it exits at once: a janitor of a run that ended
//     well never initialises the rest of the program. Otherwise (poolrun
//     died) it returns, and the program goes on to execflow.Init, which
//     reads the end of the input and ends what poolrun left.
//   - In "poolrun run FILE" with many commands to run, it re-executes the
//     program with a larger timer slack (execflow.CoalesceWakeups) before
//     the first start has initialised anything else or read the workflow:
//     a count of the "run:" keys in FILE stands for the number of jobs.
//     It does so only when that count is at least [ManyCommands], FILE is
//     a regular file, no state file lies beside it (then jobs may be
//     skipped: poolrun run decides itself, after reading the workflow), and
//     the arguments ask for no dry run, graph or help. In any other case
//     it leaves the decision to poolrun run, which counts the jobs that
//     will run (a workflow whose jobs come from a few lines, say).
//
// Elsewhere than on Linux it does nothing.
package prestart
