//go:build linux

package shm_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/poolrun/poolrun/shm"
)

// held returns the entry of process pid's windows whose descriptor is fd.
func held(t *testing.T, pid, fd int) (shm.Held, []shm.Held) {
	t.Helper()
	all, err := shm.Find(pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range all {
		if h.FD == fd {
			return h, all
		}
	}
	t.Fatalf("Find(%d) = %+v: no entry for descriptor %d", pid, all, fd)
	return shm.Held{}, nil
}

// TestFind finds windows among this process's descriptors, both kinds of
// backing file, and checks that each path opens the window it names.
func TestFind(t *testing.T) {
	memfd := create(t, 8)
	tmp, err := shm.CreateWithTempFile(16)
	if err != nil {
		t.Fatal(err)
	}
	defer tmp.Close()
	// A file whose name is merely close to a window's is not one.
	other, err := os.Create(filepath.Join(t.TempDir(), "poolrun-windows"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	a, all := held(t, os.Getpid(), int(memfd.File().Fd()))
	b, _ := held(t, os.Getpid(), int(tmp.File().Fd()))
	if a.Dev == b.Dev && a.Ino == b.Ino {
		t.Errorf("two windows with the same identity: %+v, %+v", a, b)
	}
	for _, h := range all {
		if h.FD == int(other.Fd()) {
			t.Errorf("Find lists %s, not a window", other.Name())
		}
		if h.FD < 0 {
			t.Errorf("a mapping listed although this process holds a descriptor of every window it maps: %+v", h)
		}
		if h.FD >= 0 && h.Path != "/proc/"+strconv.Itoa(os.Getpid())+"/fd/"+strconv.Itoa(h.FD) {
			t.Errorf("Path %q does not name descriptor %d", h.Path, h.FD)
		}
	}
	for _, c := range []struct {
		h shm.Held
		w *shm.Window
	}{{a, memfd}, {b, tmp}} {
		f, err := os.Open(c.h.Path)
		if err != nil {
			t.Fatal(err)
		}
		r, err := shm.Open(f)
		f.Close()
		if err != nil {
			t.Fatalf("Open(%s): %v", c.h.Path, err)
		}
		if r.Capacity() != c.w.Capacity() {
			t.Errorf("%s: capacity %d, want %d", c.h.Path, r.Capacity(), c.w.Capacity())
		}
		r.Close()
	}
}

// TestFindNameNotContent: Find goes by the name Create gives a file; Open
// is what checks the content.
func TestFindNameNotContent(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "poolrun-window-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("not a window")
	h, _ := held(t, os.Getpid(), int(f.Fd()))
	g, err := os.Open(h.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := shm.Open(g); !errors.Is(err, shm.ErrCorrupt) {
		t.Errorf("Open of %s: %v, want ErrCorrupt", h.Path, err)
	}
}

// TestFindMapping finds the window of a reader process that mapped it and
// closed its descriptor, as a poolrun worker does: the mapping has the
// identity of the writer's descriptors.
func TestFindMapping(t *testing.T) {
	w := create(t, 8)
	gen, _ := w.Publish([]uint64{4, 5, 6})
	cmd, _, out := child(t, "mapper", w.File())
	expectLine(t, out, "ready")
	mine, _ := held(t, os.Getpid(), int(w.File().Fd()))

	all, err := shm.Find(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 {
		t.Fatalf("Find(reader) = %+v, want one mapping", all)
	}
	h := all[0]
	if h.FD != -1 || h.Dev != mine.Dev || h.Ino != mine.Ino {
		t.Errorf("reader's mapping %+v, want FD -1 and the identity of %+v", h, mine)
	}
	f, err := os.Open(h.Path)
	if err != nil {
		// Opening a mapping takes CAP_SYS_ADMIN.
		t.Logf("opening the mapping (%s): %v", h.Path, err)
		return
	}
	defer f.Close()
	r, err := shm.Open(f)
	if err != nil {
		t.Fatalf("Open(%s): %v", h.Path, err)
	}
	defer r.Close()
	if s := snapshot(t, r); s.Gen != gen || len(s.Keys) != 3 {
		t.Errorf("the window through the reader's mapping: %+v, want generation %d with 3 keys", s, gen)
	}
}

func TestFindNoProcess(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	if h, err := shm.Find(cmd.Process.Pid); err == nil {
		t.Errorf("Find of the ended process %d: %+v, no error", cmd.Process.Pid, h)
	}
}

// ExampleFind opens, as another process would, the window that a process
// holds: here this one, which created it.
func ExampleFind() {
	w, err := shm.Create(0)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	w.Publish([]uint64{7, 8})

	held, err := shm.Find(os.Getpid())
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range held {
		if h.FD != int(w.File().Fd()) {
			continue // the writer's own descriptor of the same window, or other windows
		}
		f, err := os.Open(h.Path)
		if err != nil {
			log.Fatal(err)
		}
		r, err := shm.Open(f)
		f.Close()
		if err != nil {
			log.Fatal(err)
		}
		s, _ := r.Snapshot(nil)
		fmt.Println("capacity:", r.Capacity(), "keys:", s.Keys)
		r.Close()
	}
	// Output:
	// capacity: 1000 keys: [7 8]
}
