//go:build !linux

package engine

import (
	"io"
	"os"
)

// monoNow: leases are Linux's (see lease_linux.go), as is the search for
// a worker's commands (internal/spawn).
func monoNow() int64 { return 0 }

// holdLease reads what the starter sends until its end, and stops nothing.
func holdLease(f *os.File) { io.Copy(io.Discard, f) }
