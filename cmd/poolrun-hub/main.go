// Command poolrun-hub is the NATS server of a pool that spans hosts, as a
// program of its own: `poolrun run --listen ADDR` starts it, and talks to
// it over its standard input and output; it ends when the run does. It is
// not run by hand.
//
// poolrun finds it next to its own executable, else on PATH, unless
// $POOLRUN_HUB names it. Install both with
//
//	go install github.com/poolrun/poolrun/cmd/...@latest
package main

import (
	"fmt"
	"os"

	"github.com/poolrun/poolrun/cluster/hub"
	"github.com/poolrun/poolrun/internal/hubwire"
)

func main() {
	if os.Getenv(hubwire.Env) == "" {
		fmt.Fprintln(os.Stderr, "poolrun-hub is the server of a pool that spans hosts, which `poolrun run --listen ADDR` starts; it is not run by hand (see `poolrun help run`).")
		os.Exit(2)
	}
	if err := hub.Serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "poolrun-hub:", err)
		os.Exit(1)
	}
}
