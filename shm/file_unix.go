//go:build unix

package shm

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// createTempFile creates a file of the given size in os.TempDir, exclusively
// and with mode 0600, and unlinks it at once: from then on it exists only as
// long as a process holds a descriptor or a mapping of it, so nothing is left
// on disk however the process ends.
func createTempFile(size int) (*os.File, error) {
	var f *os.File
	for range 10 {
		var b [8]byte
		rand.Read(b[:])
		name := filepath.Join(os.TempDir(), fileName+"-"+hex.EncodeToString(b[:]))
		var err error
		f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("shm: creating window file: %w", err)
		}
		break
	}
	if f == nil {
		return nil, errors.New("shm: creating window file: no free name in " + os.TempDir())
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("shm: unlinking %s: %w", f.Name(), err)
	}
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, fmt.Errorf("shm: sizing %s: %w", f.Name(), err)
	}
	return f, nil
}
