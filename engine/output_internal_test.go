package engine

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// recorder records the writes it is given.
type recorder struct{ writes []string }

func (r *recorder) Write(p []byte) (int, error) {
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

// TestLineWriter: whatever the writes given to a lineWriter, the writes it
// makes add up to them, and each ends a line, but for pieces of
// maxOutputLine bytes of a longer line and the unfinished line that flush
// passes on.
func TestLineWriter(t *testing.T) {
	long := strings.Repeat("x", 2*maxOutputLine+10)
	tests := []struct {
		name   string
		in     []string // the writes given
		writes []string // the writes made, flush's last
	}{
		{name: "whole lines", in: []string{"a\nb\n"}, writes: []string{"a\nb\n"}},
		{name: "a line in pieces", in: []string{"a", "b", "c\n"}, writes: []string{"abc\n"}},
		{name: "a line ended, then more", in: []string{"a", "b\nc\nd"}, writes: []string{"ab\n", "c\n", "d"}},
		{name: "unfinished", in: []string{"a\nb"}, writes: []string{"a\n", "b"}},
		{name: "nothing", in: []string{""}},
		{name: "a long line at once", in: []string{long + "\n"}, writes: []string{long + "\n"}},
		{name: "a long line in pieces", in: []string{long[:10], long[10:], "\n"},
			writes: []string{long[:maxOutputLine], long[maxOutputLine : 2*maxOutputLine], long[2*maxOutputLine:] + "\n"}},
		{name: "exactly the bound", in: []string{long[:maxOutputLine-1], "x", "\n"},
			writes: []string{long[:maxOutputLine], "\n"}},
		{name: "a long line's end with the lines after it", in: []string{long[:maxOutputLine], "xy\na\nb"},
			writes: []string{long[:maxOutputLine], "xy\na\n", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r recorder
			lw := newLineWriter(&r)
			for _, s := range tt.in {
				if n, err := lw.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write(%d bytes) = %d, %v", len(s), n, err)
				}
			}
			lw.flush()
			if strings.Join(r.writes, "|") != strings.Join(tt.writes, "|") {
				t.Errorf("writes %.200q, want %.200q", r.writes, tt.writes)
			}
		})
	}
}

// TestLineWriterRandom cuts random text with lines of every length into
// random writes.
func TestLineWriterRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for range 20 {
		var text strings.Builder
		for range 50 {
			n := rng.IntN(100)
			if rng.IntN(10) == 0 {
				n = rng.IntN(3 * maxOutputLine)
			}
			text.WriteString(strings.Repeat("y", n))
			text.WriteByte('\n')
		}
		if rng.IntN(2) == 0 {
			text.WriteString("unfinished")
		}
		in := text.String()
		var r recorder
		lw := newLineWriter(&r)
		for rest := in; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(70000))
			lw.Write([]byte(rest[:n]))
			rest = rest[n:]
		}
		lw.flush()
		if got := strings.Join(r.writes, ""); got != in {
			t.Fatalf("the writes add up to %d bytes, want %d", len(got), len(in))
		}
		startsLine := true
		for i, w := range r.writes {
			ends := strings.HasSuffix(w, "\n")
			if !ends && len(w) != maxOutputLine && i != len(r.writes)-1 {
				t.Fatalf("write %d: %d bytes that do not end a line", i, len(w))
			}
			if !startsLine && strings.Count(w, "\n") > 1 {
				t.Fatalf("write %d ends a line begun before and holds others", i)
			}
			startsLine = ends
		}
	}
}
