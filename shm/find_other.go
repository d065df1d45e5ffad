//go:build !linux

package shm

import (
	"errors"
	"fmt"
)

// Find returns the windows that process pid holds. It needs Linux's /proc;
// elsewhere it returns an error wrapping [errors.ErrUnsupported].
func Find(pid int) ([]Held, error) {
	return nil, fmt.Errorf("shm: finding the windows of process %d: %w", pid, errors.ErrUnsupported)
}
