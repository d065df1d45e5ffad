//go:build !linux

package cli

import "os"

// terminal reports whether f is a character device, as terminals are
// (and /dev/null too).
func terminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
