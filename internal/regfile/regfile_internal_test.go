package regfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestRegular: the check made on the open descriptor, for a path that
// became something else after it was stat'ed, refuses a FIFO and a
// directory, naming the file.
func TestRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "wf.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
	for _, tt := range []struct {
		path string
		want string
	}{
		{fifo, fifo + ": is a named pipe (FIFO), not a regular file"},
		{dir, dir + ": is a directory, not a regular file"},
	} {
		// Opened as open opens a path, which must not wait for the FIFO's
		// writer.
		opened := make(chan *os.File, 1)
		go func() {
			f, err := os.OpenFile(tt.path, os.O_RDONLY|openFlags, 0)
			if err != nil {
				t.Error(err)
			}
			opened <- f
		}()
		var f *os.File
		select {
		case f = <-opened:
		case <-time.After(10 * time.Second):
			t.Fatalf("opening %s with openFlags did not return within 10s", tt.path)
		}
		if f == nil {
			continue
		}
		_, err := regular(f)
		f.Close()
		if !errors.Is(err, ErrNotRegular) || err.Error() != tt.want {
			t.Errorf("regular(%s) = %v; want %q", tt.path, err, tt.want)
		}
	}
}

// TestNotRegularErrorSays: each type of file is named as what it is.
func TestNotRegularErrorSays(t *testing.T) {
	for _, tt := range []struct {
		mode fs.FileMode
		want string
	}{
		{fs.ModeNamedPipe, "p: is a named pipe (FIFO), not a regular file"},
		{fs.ModeDir, "p: is a directory, not a regular file"},
		{fs.ModeDevice, "p: is a device, not a regular file"},
		{fs.ModeDevice | fs.ModeCharDevice, "p: is a device, not a regular file"},
		{fs.ModeSocket, "p: is a socket, not a regular file"},
		{fs.ModeSymlink, "p: is a symbolic link, not a regular file"},
		{fs.ModeIrregular, "p: is not a regular file"},
	} {
		if got := (&NotRegularError{Path: "p", Mode: tt.mode}).Error(); got != tt.want {
			t.Errorf("mode %v: %q, want %q", tt.mode, got, tt.want)
		}
	}
}
