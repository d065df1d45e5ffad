// Command poolrun runs a graph of jobs on a pool of worker processes that
// share a window of still-required cache items.
package main

import (
	"fmt"
	"os"
)

const usage = `poolrun runs a graph of jobs on a pool of worker processes on this host.

The command-line tool is being built; for now poolrun is a Go library:
  github.com/poolrun/poolrun/shm        the shared window of required item keys
`

func main() {
	fmt.Fprint(os.Stdout, usage)
}
