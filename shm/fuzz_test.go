package shm_test

import (
	"errors"
	"os"
	"testing"

	"github.com/poolrun/poolrun/shm"
)

// FuzzOpen feeds Open arbitrary files: it must refuse what is not a window
// with ErrCorrupt and a window of another layout version with ErrVersion,
// never panic, and a window it accepts must give a snapshot or an error,
// never a crash. Beyond the seeds below, the corpus in testdata/fuzz/FuzzOpen
// holds valid windows (empty, published, overflowed, a writer that died
// mid-publish, an impossible count), headers wrong in one field each, and
// inputs the fuzzer found ("fuzzed-*").
//
// The file is data followed by pad zero bytes: the smallest window is two
// pages, mostly zeros, and the padding lets a short input (a header, say)
// stand for a whole file, which keeps the corpus small and the mutations on
// the bytes that matter.
func FuzzOpen(f *testing.F) {
	f.Add(header(8), uint16(0))
	f.Add(header(8)[:48], uint16(len(header(8))-48))
	f.Add(header(1)[:shm.HeaderSize], uint16(0))
	f.Add([]byte("poolrunW"), uint16(0))
	f.Add([]byte{}, uint16(0))
	dir := f.TempDir() // one folder for all inputs: a t.TempDir each made fuzzing several times slower
	f.Fuzz(func(t *testing.T, data []byte, pad uint16) {
		file, err := os.CreateTemp(dir, "window")
		if err != nil {
			t.Fatal(err)
		}
		defer os.Remove(file.Name())
		defer file.Close()
		if _, err := file.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := file.Truncate(int64(len(data)) + int64(pad)); err != nil {
			t.Fatal(err)
		}
		w, err := shm.Open(file)
		magic := len(data) >= 8 && string(data[:8]) == "poolrunW"
		switch {
		case err == nil:
			if !magic {
				t.Fatalf("Open accepted a file without the magic number: %q...", data[:min(len(data), 8)])
			}
		case errors.Is(err, shm.ErrVersion):
			if errors.Is(err, shm.ErrCorrupt) || !magic {
				t.Fatalf("Open: %v: ErrVersion for a file that is not a window (magic %v) or also ErrCorrupt", err, magic)
			}
			return
		case errors.Is(err, shm.ErrCorrupt):
			return
		default:
			t.Fatalf("Open: %v, want ErrCorrupt or ErrVersion", err)
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
