package scaffold

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The helper process of TestWriteAtomicUmask: with these set, it sets the
// umask and writes the file, and does nothing else.
const (
	envUmask = "SCAFFOLD_TEST_UMASK"
	envPath  = "SCAFFOLD_TEST_PATH"
)

// TestWriteAtomicUmaskHelper is the helper process of TestWriteAtomicUmask
// (the umask belongs to the whole process, so each is set in a process of
// its own); run directly, it is skipped.
func TestWriteAtomicUmaskHelper(t *testing.T) {
	mask, path := os.Getenv(envUmask), os.Getenv(envPath)
	if mask == "" || path == "" {
		t.Skip("the helper process of TestWriteAtomicUmask")
	}
	m, err := strconv.ParseUint(mask, 8, 32)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Umask(int(m))
	if err := writeAtomic(path, []byte("data")); err != nil {
		t.Fatal(err)
	}
}

// TestWriteAtomicUmask writes an output file, in folders that do not exist
// yet, under several umasks: the file gets mode 0666 and the folders 0777,
// less the umask, as any Unix tool's would, never a mode of their own.
func TestWriteAtomicUmask(t *testing.T) {
	for _, mask := range []os.FileMode{0o022, 0o002, 0o077} {
		t.Run(fmt.Sprintf("umask %03o", mask), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "placement", "granule", "0_0_0.bin")
			cmd := exec.Command(os.Args[0], "-test.run=^TestWriteAtomicUmaskHelper$")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%o", envUmask, mask), envPath+"="+path)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("helper: %v\n%s", err, out)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := fi.Mode().Perm(), 0o666&^mask; got != want {
				t.Errorf("file mode %v, want %v", got, want)
			}
			for _, d := range []string{filepath.Dir(path), filepath.Dir(filepath.Dir(path))} {
				fi, err := os.Stat(d)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := fi.Mode().Perm(), 0o777&^mask; got != want {
					t.Errorf("folder %s: mode %v, want %v", filepath.Base(d), got, want)
				}
			}
			if data, err := os.ReadFile(path); err != nil || string(data) != "data" {
				t.Errorf("the file holds %q, %v", data, err)
			}
			if n, err := RemoveTemp(dir); err != nil || n != 0 {
				t.Errorf("temporary files left: %d, %v", n, err)
			}
		})
	}
}

// TestWriteAtomicRefusesLink: a symbolic link planted where an output file
// goes is refused; the link and its target stay as they were, and no
// temporary file is left.
func TestWriteAtomicRefusesLink(t *testing.T) {
	dir, victim := t.TempDir(), t.TempDir()
	target := filepath.Join(victim, "precious")
	if err := os.WriteFile(target, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "placement", "granule", "0_0_0.bin")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	err := writeAtomic(path, []byte("data"))
	if !errors.Is(err, errSymlink) || !strings.Contains(err.Error(), path) {
		t.Errorf("writeAtomic over a link: %v, want an error that names it and says it is a link", err)
	}
	if data, err := os.ReadFile(target); err != nil || string(data) != "precious" {
		t.Errorf("the link's target holds %q, %v", data, err)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link: %v, %v", fi, err)
	}
	if n, err := RemoveTemp(dir); err != nil || n != 0 {
		t.Errorf("temporary files left: %d, %v", n, err)
	}
}

// TestWriteAtomicReplaces: a file already at the path is replaced whole.
func TestWriteAtomicReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.bin")
	if err := os.WriteFile(path, []byte("an older and longer content"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(path, []byte("data")); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != "data" {
		t.Errorf("the file holds %q, %v", data, err)
	}
}
