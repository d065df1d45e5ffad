package shm_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/poolrun/poolrun/shm"
)

// FuzzOpen feeds Open arbitrary files: it must refuse what is not a window
// with ErrCorrupt, never panic, and a window it accepts must give a
// snapshot or an error, never a crash.
func FuzzOpen(f *testing.F) {
	f.Add(header(8))
	f.Add(header(1)[:shm.HeaderSize])
	f.Add([]byte("poolrunW"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "window")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		file, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		w, err := shm.Open(file)
		if err != nil {
			if !errors.Is(err, shm.ErrCorrupt) {
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
			return
		}
		defer w.Close()
		w.SetStallTimeout(1)
		if s, err := w.Snapshot(nil); err == nil {
			s.Contains(1)
			if len(s.Keys) > w.Capacity() {
				t.Fatalf("snapshot of %d keys from a window of %d slots", len(s.Keys), w.Capacity())
			}
		}
	})
}
