// Command poolrun runs a graph of jobs on a pool of worker processes on one
// host. Jobs declare the expensive in-memory items they need; each worker
// builds an item once, keeps it while any unfinished job in the pool needs
// it, and frees it the moment none does.
//
// Run "poolrun help" for the commands.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/cli"
	"github.com/poolrun/poolrun/internal/execflow"
)

func main() {
	engine.Init()   // in a worker process: serve jobs, then exit
	execflow.Init() // in poolrun run's janitor: wait for its end, then exit
	// SIGHUP (the terminal went away) ends a run as SIGINT and SIGTERM do:
	// workers stopped, scratch removed, the report written, status 130.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	err := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	code := cli.ExitCode(err)
	if err != nil && code != cli.ExitOK {
		if code == cli.ExitInterrupted {
			fmt.Fprintln(os.Stderr, "poolrun: interrupted")
		} else {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}
