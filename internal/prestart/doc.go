// Package prestart does, while a poolrun program is being initialised,
// what needs nothing but its arguments, its environment and the workflow
// file, and would otherwise wait for the rest of its initialisation: some
// 15 ms on a small machine (GODEBUG=inittrace=1: this package's init runs
// 6-8 ms after the start, main 22 ms after it), most of it the packages
// of the cluster transport.
//
// A program imports it for that alone, as cmd/poolrun does:
//
//	import _ "github.com/poolrun/poolrun/internal/prestart"
//
// Its init runs right after package os's, before the heavy packages (Go
// initialises a package as soon as what it imports is, in the order of
// import paths). In "poolrun run FILE" with many commands to run, it
// re-executes the program with a larger timer slack
// (execflow.CoalesceWakeups) before the first start has initialised
// anything else or read the workflow: a count of the "run:" keys in FILE
// stands for the number of jobs. It does so only when that count is at
// least [ManyCommands], FILE is a regular file, no state file lies beside
// it (then jobs may be skipped: poolrun run decides itself, after reading
// the workflow), and the arguments ask for no dry run, graph or help. In
// any other case it leaves the decision to poolrun run, which counts the
// jobs that will run (a workflow whose jobs come from a few lines, say).
//
// Elsewhere than on Linux it does nothing.
package prestart
