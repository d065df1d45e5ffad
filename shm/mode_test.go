package shm_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/poolrun/poolrun/shm"
)

// TestWindowPrivate checks that a window's file is private, as Create makes
// it (an anonymous memory file where the system has one) and as its
// fallback does (a file in the temporary folder): mode 0600 and this user's;
// the fallback's made under a random name, a new one each time, and
// unlinked at once, so that no path in the shared temporary folder leads to
// it; and the descriptor handed to readers is read-only.
func TestWindowPrivate(t *testing.T) {
	for _, c := range []struct {
		name   string
		create func(int) (*shm.Window, error)
	}{
		{"Create", shm.Create},
		{"temporary file", shm.CreateWithTempFile},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			var names []string
			for range 2 {
				w, err := c.create(0)
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				fd := int(w.File().Fd())
				var st unix.Stat_t
				if err := unix.Fstat(fd, &st); err != nil {
					t.Fatal(err)
				}
				if perm := st.Mode & 0o7777; perm != 0o600 {
					t.Errorf("the window's file has mode %#o, want 0600", perm)
				}
				if int(st.Uid) != os.Getuid() {
					t.Errorf("the window's file belongs to user %d, not %d", st.Uid, os.Getuid())
				}
				flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
				if err != nil {
					t.Fatal(err)
				}
				if flags&unix.O_ACCMODE != unix.O_RDONLY {
					t.Errorf("the readers' descriptor is open with flags %#x, not read-only", flags)
				}
				name, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
				if err != nil {
					t.Skip("no /proc/self/fd:", err)
				}
				names = append(names, name)
				if c.name == "temporary file" {
					if st.Nlink != 0 {
						t.Errorf("the window's file %s has %d links, want none", name, st.Nlink)
					}
					if !strings.HasSuffix(name, " (deleted)") {
						t.Errorf("the window's file is %s, not deleted", name)
					}
				}
			}
			if names[0] == names[1] && strings.HasPrefix(names[0], tmp) {
				t.Errorf("two windows' files had the same name, %s: predictable", names[0])
			}
			if entries, err := os.ReadDir(tmp); err != nil || len(entries) > 0 {
				t.Errorf("the temporary folder holds %v (%v)", entries, err)
			}
		})
	}
}
