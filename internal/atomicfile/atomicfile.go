// Package atomicfile writes a file whole or not at all, as poolrun writes
// its reports and state files.
package atomicfile

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"github.com/poolrun/poolrun/internal/regfile"
)

// Write writes data to path atomically: into a temporary file in the same
// folder, created exclusively under a random name (never through a
// symbolic link) with mode 0666 less the umask, as any Unix tool's file,
// synced and renamed to path, and the folder synced. It replaces only a
// regular file: what else path names is refused as [Check] refuses it,
// neither followed nor replaced. On an error the temporary file is
// removed and path is as it was.
func Write(path string, data []byte) error { return WriteMode(path, data, 0o666) }

// Check returns the error that [Write] would return for what path names
// now, before anything is written: nil for nothing (path is to be
// created) or a regular file, and a [*regfile.NotRegularError] that names
// path for anything else. A symbolic link is refused whatever it points
// to, since Write neither writes through one nor replaces it; so are a
// folder, a device, a named pipe (FIFO) and a socket, which a rename would
// replace: /dev/null made a regular file, say. Any other error is that of
// lstat(2), which names path.
func Check(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return &regfile.NotRegularError{Path: path, Mode: fi.Mode().Type()}
	}
	return nil
}

// WriteMode is Write with the file's mode perm less the umask, rather than
// 0666 less the umask: 0600 for a file that only its owner may read.
func WriteMode(path string, data []byte, perm os.FileMode) error {
	f, err := createTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-", perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// Checked again last: path may have become something else while
		// the data was written.
		err = Check(path)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir syncs the folder dir, so that a rename in it survives a power
// cut as the file's content does.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// createTemp creates a new file in dir named prefix and random digits,
// exclusively (an existing name, a symbolic link included, is never
// opened: another is drawn), with mode perm less the umask; os.CreateTemp
// would make it 0600 whatever the umask.
func createTemp(dir, prefix string, perm os.FileMode) (*os.File, error) {
	for range 100 {
		name := filepath.Join(dir, prefix+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if !errors.Is(err, os.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("no free name for a temporary file %s* in %s", prefix, dir)
}
