package engine

import (
	"bytes"
	"testing"
	"time"
)

// TestItemNotesWire sends item notes in each frame that carries them and
// checks that names, sizes, reasons and times (within the time the test
// took) come back.
func TestItemNotesWire(t *testing.T) {
	t0 := time.Now().Add(-time.Minute)
	notes := []itemNote{
		{key: 7, name: "poolrun.item:ref@00", bytes: 123, start: t0, end: t0.Add(2 * time.Second)},
		{key: 8, name: "", bytes: 0, start: t0.Add(3 * time.Second), end: t0.Add(3 * time.Second), reason: EvictedByPolicy},
		{key: 1 << 63, name: "ü", bytes: 1 << 40, start: t0.Add(4 * time.Second), end: t0.Add(4 * time.Second), reason: EvictedAtEnd},
	}
	began := time.Now() // the notes' times are off by the time from encoding to decoding
	var e enc
	e.done(&reply{id: 1, items: notes})
	e.state(&workerState{items: notes[1:2]})
	e.bye(&byeInfo{items: notes[2:]})
	fr := newFrameReader(bytes.NewReader(e.b))
	var got []itemNote
	for range 3 {
		kind, d, err := fr.next()
		if err != nil {
			t.Fatal(err)
		}
		switch kind {
		case frameDone:
			var r reply
			if err := d.done(&r); err != nil {
				t.Fatal(err)
			}
			got = append(got, r.items...)
		case frameState:
			s, err := d.state()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, s.items...)
		case frameBye:
			b, err := d.bye()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, b.items...)
		}
	}
	want := append(append(notes[:3:3], notes[1]), notes[2])
	if len(got) != len(want) {
		t.Fatalf("got %d notes, want %d: %+v", len(got), len(want), got)
	}
	slack := time.Since(began) + time.Millisecond
	for i, w := range want {
		g := got[i]
		if g.key != w.key || g.name != w.name || g.bytes != w.bytes || g.reason != w.reason {
			t.Errorf("note %d = %+v, want %+v", i, g, w)
		}
		if d := g.start.Sub(w.start).Abs(); d > slack {
			t.Errorf("note %d: start off by %v", i, d)
		}
		if d := g.end.Sub(w.end).Abs(); d > slack {
			t.Errorf("note %d: end off by %v", i, d)
		}
	}
	// A note with an unknown reason is a bad frame.
	e.b = e.b[:0]
	e.state(&workerState{items: []itemNote{{reason: 9}}})
	_, d, err := newFrameReader(bytes.NewReader(e.b)).next()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.state(); err == nil {
		t.Error("a note of reason 9 decoded without an error")
	}
}
