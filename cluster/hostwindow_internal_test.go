package cluster

import (
	"errors"
	"maps"
	"slices"
	"testing"
)

// TestParts: the sets of an agent's workers come back as they were sent,
// and a message cut anywhere is refused, not read past its end.
func TestParts(t *testing.T) {
	in := map[string]part{
		"a":   {gen: 2, keys: []uint64{1, 2, 3}},
		"bb":  {gen: 1 << 40, over: true},
		"ccc": {gen: 6, keys: []uint64{}},
	}
	msg := encodeParts(in)
	out := map[string]part{}
	if err := decodeParts(msg, func(id string, p part) { out[id] = p }); err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(in, out, func(a, b part) bool {
		return a.gen == b.gen && a.over == b.over && slices.Equal(a.keys, b.keys)
	}) {
		t.Errorf("decoded %v, sent %v", out, in)
	}
	for n := 1; n < len(msg); n++ {
		err := decodeParts(msg[:n], func(string, part) {})
		if err != nil && !errors.Is(err, errParts) {
			t.Errorf("cut at %d: %v", n, err)
		}
	}
}

// FuzzParts: no message makes decodeParts panic or read past its end.
func FuzzParts(f *testing.F) {
	f.Add(encodeParts(map[string]part{"x": {gen: 4, keys: []uint64{9}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeParts(b, func(string, part) {})
	})
}
