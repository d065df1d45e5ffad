//go:build !linux

package execflow

import (
	"errors"
	"os"
)

// maxArgCommand: see script_linux.go.
const maxArgCommand = 64 << 10

// scriptFile needs Linux' memory files.
func scriptFile(run string) (*os.File, []string, error) {
	return nil, nil, errors.New("a command over 64 KiB needs Linux")
}
