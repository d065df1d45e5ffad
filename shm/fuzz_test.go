package shm_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/poolrun/poolrun/shm"
)

// FuzzOpen feeds Open arbitrary files: it must refuse what is not a window
// with ErrCorrupt and a window of another layout version with ErrVersion,
// never panic, and a window it accepts must give a snapshot or an error,
// never a crash, and must not make WaitGen block. Beyond the seeds below,
// the corpus in testdata/fuzz/FuzzOpen holds valid windows (empty,
// published, overflowed, a writer that died mid-publish, an impossible
// count), headers wrong in one field each, and inputs the fuzzer found
// ("fuzzed-*"); TestFuzzCorpus holds each file to its name.
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
		// Whatever the sequence holds, WaitGen returns at once for a
		// generation already reached, and at a deadline already passed.
		g := w.Gen()
		if got, err := w.WaitGen(g, time.Time{}); got != g || err != nil {
			t.Fatalf("WaitGen(%d), the current generation: %d, %v", g, got, err)
		}
		if next := (g | 1) + 1; next > g { // the next even generation, unless g is the largest
			if got, err := w.WaitGen(next, time.Unix(1, 0)); got != g || !errors.Is(err, shm.ErrDeadline) {
				t.Fatalf("WaitGen(%d) past its deadline: %d, %v; want %d, ErrDeadline", next, got, err, g)
			}
		}
	})
}

// TestFuzzCorpus holds the committed corpus of FuzzOpen to the names of its
// files: "valid-*" and "fuzzed-*" are windows of this build's layout that
// Open accepts, "wrong-version" one of another version, "count-beyond-capacity"
// one that Open accepts and Snapshot refuses, and every other file is not a
// window. A new layout version must rewrite the corpus (its version words),
// or this test says which file no longer means what its name says.
func TestFuzzCorpus(t *testing.T) {
	if os.Getpagesize() != 4096 {
		t.Skipf("the corpus is sized for 4096-byte pages, this machine has %d", os.Getpagesize())
	}
	files, err := filepath.Glob("testdata/fuzz/FuzzOpen/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			data, pad := readCorpusFile(t, path)
			file := filepath.Join(t.TempDir(), "window")
			if err := os.WriteFile(file, append(data, make([]byte, pad)...), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			w, err := shm.Open(f)
			if err == nil {
				defer w.Close()
			}
			switch {
			case strings.HasPrefix(name, "valid-"), strings.HasPrefix(name, "fuzzed-"):
				if err != nil {
					t.Errorf("Open: %v, want a window", err)
				}
			case name == "count-beyond-capacity":
				if err != nil {
					t.Fatalf("Open: %v, want a window", err)
				}
				if _, err := w.Snapshot(nil); !errors.Is(err, shm.ErrCorrupt) {
					t.Errorf("Snapshot: %v, want ErrCorrupt", err)
				}
			case name == "wrong-version":
				if !errors.Is(err, shm.ErrVersion) {
					t.Errorf("Open: %v, want ErrVersion", err)
				}
			default:
				if !errors.Is(err, shm.ErrCorrupt) {
					t.Errorf("Open: %v, want ErrCorrupt", err)
				}
			}
		})
	}
}

// readCorpusFile reads a FuzzOpen corpus file: the data and the padding.
func readCorpusFile(t *testing.T, path string) (data []byte, pad int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 || lines[0] != "go test fuzz v1" {
		t.Fatalf("%s is not a corpus file of two values", path)
	}
	quoted, ok1 := strings.CutPrefix(lines[1], "[]byte(")
	n, ok2 := strings.CutPrefix(lines[2], "uint16(")
	s, err1 := strconv.Unquote(strings.TrimSuffix(quoted, ")"))
	pad, err2 := strconv.Atoi(strings.TrimSuffix(n, ")"))
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		t.Fatalf("%s: cannot read %q and %q", path, lines[1], lines[2])
	}
	return []byte(s), pad
}
