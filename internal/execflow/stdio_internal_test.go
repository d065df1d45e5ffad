package execflow

import (
	"os"
	"strings"
	"sync"
	"testing"
)

// writes records the writes it is given.
type writes struct {
	mu sync.Mutex
	w  []string
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.w = append(w.w, string(p))
	return len(p), nil
}

// copyThrough writes each of in to a pipe whose read end a lineCopy with
// prefix copies, and returns the writes the copy made, and what went to
// its tail.
func copyThrough(t *testing.T, prefix string, in []string) ([]string, string) {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	var out writes
	tail := newTailWriter(1)
	c := newLineCopy(&out, prefix, tail)
	c.r = pr
	c.start()
	for _, s := range in {
		if _, err := pw.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	pw.Close()
	<-c.c.Done()
	return out.w, tail.String()
}

// TestLineCopy: tagged, each line is whole and prefixed, a line too long
// is cut into tagged lines of maxLine bytes, and an unfinished last line
// is ended; untagged, the bytes pass as they are, whole lines at a time.
func TestLineCopy(t *testing.T) {
	const tag = "[j] "
	long := strings.Repeat("x", 2*maxLine)
	piece := maxLine - len(tag) - 1
	tests := []struct {
		name   string
		prefix string
		in     []string
		want   string // the writes joined
	}{
		{name: "tagged lines", prefix: tag, in: []string{"a\nb\n"}, want: "[j] a\n[j] b\n"},
		{name: "tagged, a line in pieces", prefix: tag, in: []string{"a", "b", "c\nd\n"}, want: "[j] abc\n[j] d\n"},
		{name: "tagged, unfinished", prefix: tag, in: []string{"a\nb"}, want: "[j] a\n[j] b\n"},
		{name: "tagged, empty lines", prefix: tag, in: []string{"\n\n"}, want: "[j] \n[j] \n"},
		{name: "tagged, a long line", prefix: tag, in: []string{long + "\n"},
			want: tag + long[:piece] + "\n" + tag + long[piece:2*piece] + "\n" + tag + long[2*piece:] + "\n"},
		{name: "untagged", in: []string{"a", "b\nc", "\nd"}, want: "ab\nc\nd"},
		{name: "untagged, a long line", in: []string{long, "\n"}, want: long + "\n"},
		{name: "many tagged lines", prefix: tag, in: []string{strings.Repeat("line\n", 20000)}, want: strings.Repeat("[j] line\n", 20000)},
		{name: "nothing", prefix: tag, in: nil, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, tail := copyThrough(t, tt.prefix, tt.in)
			if j := strings.Join(got, ""); j != tt.want {
				t.Errorf("got %.300q, want %.300q", j, tt.want)
			}
			for i, w := range got {
				for _, line := range strings.SplitAfter(w, "\n") {
					if len(line) > maxLine {
						t.Errorf("write %d: a line of %d bytes, more than %d", i, len(line), maxLine)
					}
				}
				if tt.prefix != "" && !strings.HasSuffix(w, "\n") {
					t.Errorf("write %d: %.80q does not end a line", i, w)
				}
			}
			// The tail gets what the command wrote, untagged.
			if all := strings.Join(tt.in, ""); !strings.HasSuffix(strings.TrimSuffix(all, "\n"), strings.TrimSuffix(tail, " [...]")) {
				t.Errorf("tail %.80q is not the end of what was written", tail)
			}
		})
	}
}

func TestLogName(t *testing.T) {
	long := strings.Repeat("a", 300)
	tests := []struct{ id, want string }{
		{"align-1", "align-1"},
		{"a_b.c:d+e=f@g", "a_b.c:d+e=f@g"},
		{"sample/1", "sample%2F1"},
		{".hidden", "%2Ehidden"},
		{"..", "%2E."},
		{"a..b", "a..b"},
		{"50%", "50%25"},
		{"tab\there", "tab%09here"},
		{"", "%"},
	}
	for _, tt := range tests {
		if got := logName(tt.id); got != tt.want {
			t.Errorf("logName(%q) = %q, want %q", tt.id, got, tt.want)
		}
	}
	a, b := logName(long), logName(long+"b")
	if len(a) > maxLogName || len(b) > maxLogName || a == b || !strings.HasPrefix(a, long[:maxLogName-17]+"~") {
		t.Errorf("long ids: %q and %q; want distinct names of at most %d bytes", a, b, maxLogName)
	}
	// Distinct ids, distinct names: an escaped id never equals a plain one.
	if logName("a/b") == logName("a%2Fb") {
		t.Error(`"a/b" and "a%2Fb" share a name`)
	}
}
