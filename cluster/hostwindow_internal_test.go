package cluster

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
)

// TestPart: a worker's set comes back as it was sent, and a record cut
// anywhere, or with bytes after its keys, is refused.
func TestPart(t *testing.T) {
	for _, in := range []part{
		{gen: 2, keys: []uint64{1, 2, 3}},
		{gen: 1 << 40, over: true},
		{gen: 6, keys: []uint64{}},
	} {
		b := encodePart(in)
		out, err := decodePart(b)
		if err != nil || out.gen != in.gen || out.over != in.over || !slices.Equal(out.keys, in.keys) {
			t.Errorf("decoded %+v, %v; sent %+v", out, err, in)
		}
		for n := range len(b) {
			if _, err := decodePart(b[:n]); !errors.Is(err, errPart) {
				t.Errorf("%+v cut at %d: %v, want errPart", in, n, err)
			}
		}
		if _, err := decodePart(append(b, 0)); !errors.Is(err, errPart) {
			t.Errorf("%+v with a byte after it: %v, want errPart", in, err)
		}
	}
}

// FuzzPart: no record makes decodePart panic or read past its end.
func FuzzPart(f *testing.F) {
	f.Add(encodePart(part{gen: 4, keys: []uint64{9}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		decodePart(b)
	})
}

// TestRecords: records come back as they were written, whatever the
// reads that carry them; a stream cut within a record ends with
// io.ErrUnexpectedEOF, and a record longer than the limit is refused.
func TestRecords(t *testing.T) {
	type rec struct {
		kind    byte
		slot    uint64
		payload []byte
	}
	in := []rec{{recJobs, 1, []byte("abc")}, {recPing, 0, []byte{}}, {recWin, 1 << 33, bytes.Repeat([]byte{7}, 70000)}}
	var b []byte
	lastAt := 0
	for _, r := range in {
		lastAt = len(b)
		b = appendRecord(b, r.kind, r.slot, r.payload)
	}
	rr := newRecordReader(io.MultiReader(bytes.NewReader(b[:5]), bytes.NewReader(b[5:])))
	for i, want := range in {
		kind, slot, payload, err := rr.next()
		if err != nil || kind != want.kind || slot != want.slot || !bytes.Equal(payload, want.payload) {
			t.Fatalf("record %d: kind %d slot %d %d bytes, %v; want kind %d slot %d %d bytes", i, kind, slot, len(payload), err, want.kind, want.slot, len(want.payload))
		}
	}
	if _, _, _, err := rr.next(); err != io.EOF {
		t.Errorf("after the last record: %v, want io.EOF", err)
	}
	for _, n := range []int{1, 2, 4, len(b) - lastAt - 1} {
		rr := newRecordReader(bytes.NewReader(b[lastAt:][:n]))
		if _, _, _, err := rr.next(); err != io.ErrUnexpectedEOF {
			t.Errorf("a stream cut %d bytes into a record: %v, want io.ErrUnexpectedEOF", n, err)
		}
	}
	huge := appendHeader(nil, recJobs, 1, maxRecord+1)
	if _, _, _, err := newRecordReader(bytes.NewReader(huge)).next(); err == nil {
		t.Error("a record over the limit was read")
	}
}
