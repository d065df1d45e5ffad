package shm

import (
	"encoding/binary"
	"os"
	"testing"
)

// TestLayout checks the byte offsets drawn in layout.go against the bytes of
// a real mapping.
func TestLayout(t *testing.T) {
	w, err := Create(3)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	gen, err := w.Publish([]uint64{0x1111, 0x3333, 0x2222})
	if err != nil {
		t.Fatal(err)
	}
	m := w.mapping
	at := func(off int) uint64 { return binary.NativeEndian.Uint64(m[off:]) }
	if string(m[0:8]) != "poolrunW" {
		t.Errorf("magic bytes %q, want %q", m[0:8], "poolrunW")
	}
	checks := []struct {
		name      string
		off       int
		want      uint64
		constOff  int
		constName string
	}{
		{"version", 8, layoutVersion, offVersion, "offVersion"},
		{"capacity", 16, 3, offCapacity, "offCapacity"},
		{"seq", 24, gen, offSeq, "offSeq"},
		{"count", 32, 3, offCount, "offCount"},
		{"overflow", 40, 0, offOverflow, "offOverflow"},
		{"slot 0", 4096, 0x1111, headerSize, "headerSize"},
		{"slot 1", 4104, 0x2222, headerSize + 8, "headerSize+8"},
		{"slot 2", 4112, 0x3333, headerSize + 16, "headerSize+16"},
	}
	for _, c := range checks {
		if c.off != c.constOff {
			t.Errorf("%s: %s = %d, layout drawing says %d", c.name, c.constName, c.constOff, c.off)
		}
		if got := at(c.off); got != c.want {
			t.Errorf("%s at byte %d = %#x, want %#x", c.name, c.off, got, c.want)
		}
	}
	// The futex word is the half of seq that holds its least significant
	// bits: at byte 24 on a little-endian machine, 28 on a big-endian one.
	low := 24
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		low = 28
	}
	if got := offGenWord(); got != low {
		t.Errorf("genWord: offGenWord() = %d, the layout drawing says %d on this machine", got, low)
	}
	w.h.seq.Store(7<<32 | 4) // halves that differ
	if got, want := binary.NativeEndian.Uint32(m[low:]), uint32(4); got != want || *w.h.genWord != want {
		t.Errorf("genWord: byte %d holds %d and the accessor reads %d for sequence %#x, want %d", low, got, *w.h.genWord, w.h.seq.Load(), want)
	}
	if gen, _ := w.Publish([]uint64{0x4444}); *w.h.genWord != uint32(gen) || uint32(gen) != 6 {
		t.Errorf("genWord: %d after publishing generation %#x, want %d", *w.h.genWord, gen, uint32(gen))
	}
	if got, want := len(m), os.Getpagesize()*2; got != want {
		t.Errorf("mapping of capacity 3 is %d bytes, want %d (header page + one page of slots)", got, want)
	}
	if headerSize%os.Getpagesize() != 0 {
		t.Errorf("header size %d is not a whole number of %d-byte pages", headerSize, os.Getpagesize())
	}
}
