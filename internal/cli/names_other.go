//go:build !linux

package cli

import (
	"os"

	"github.com/poolrun/poolrun/cachepool"
)

const namesFile = "poolrun-names"

// openNames is Linux-only (anonymous memory files); elsewhere inspect shows
// the names this binary knows.
func openNames([]cachepool.Handle) *os.File { return nil }
