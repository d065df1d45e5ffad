package atomicfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/poolrun/poolrun/internal/atomicfile"
	"github.com/poolrun/poolrun/internal/regfile"
)

// TestWriteReplacesOnlyRegularFiles: Write makes a file or replaces a
// regular one; anything else at the path (a folder, a named pipe, a
// device, a symbolic link, to a regular file or not) is refused, naming
// the path and saying what it is, and left as it was; no temporary file
// is left.
func TestWriteReplacesOnlyRegularFiles(t *testing.T) {
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	os.WriteFile(path("old"), []byte("old"), 0o644)
	os.WriteFile(path("target"), []byte("target"), 0o644)
	os.Mkdir(path("folder"), 0o755)
	os.Symlink(path("target"), path("link"))
	os.Symlink(path("folder"), path("folder-link"))
	if err := syscall.Mkfifo(path("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The device of /dev/null (1, 3), made here: a regression replaces
	// this one, not the system's.
	device := os.Getuid() == 0 && syscall.Mknod(path("null"), syscall.S_IFCHR|0o666, 1<<8|3) == nil

	for _, tt := range []struct {
		name string
		says string // "" if Write succeeds
	}{
		{"new", ""},
		{"old", ""},
		{"folder", "is a directory, not a regular file"},
		{"fifo", "is a named pipe (FIFO), not a regular file"},
		{"null", "is a device, not a regular file"},
		{"link", "is a symbolic link, not a regular file"},
		{"folder-link", "is a symbolic link, not a regular file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "null" && !device {
				t.Skip("no device can be made here (mknod needs root)")
			}
			p := path(tt.name)
			before, _ := os.Lstat(p)
			cerr := atomicfile.Check(p)
			err := atomicfile.Write(p, []byte("new"))
			if tt.says == "" {
				if cerr != nil || err != nil {
					t.Fatalf("Check: %v; Write: %v", cerr, err)
				}
				if data, err := os.ReadFile(p); string(data) != "new" {
					t.Errorf("%s holds %q, %v; want \"new\"", p, data, err)
				}
				return
			}
			for what, err := range map[string]error{"Check": cerr, "Write": err} {
				if !errors.Is(err, regfile.ErrNotRegular) || err.Error() != p+": "+tt.says {
					t.Errorf("%s: %v; want %q", what, err, p+": "+tt.says)
				}
			}
			after, err := os.Lstat(p)
			if err != nil || after.Mode() != before.Mode() || !os.SameFile(before, after) {
				t.Errorf("%s was replaced: %v, %v", p, after.Mode(), err)
			}
		})
	}
	if data, _ := os.ReadFile(path("target")); string(data) != "target" {
		t.Errorf("the link's target holds %q", data)
	}
	names, _ := os.ReadDir(dir)
	for _, n := range names {
		if strings.Contains(n.Name(), ".tmp-") {
			t.Errorf("a temporary file is left: %s", n.Name())
		}
	}
}
