package yamlline_test

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/poolrun/poolrun/internal/yamlline"
)

// TestLocate decodes documents with a mistake on a known line and checks
// the line found, whatever line the library gives.
func TestLocate(t *testing.T) {
	for _, tt := range []struct {
		name, doc string
		line      int
	}{
		{"misindented key", "a:\n  b: 1\n  c: 2\n   d: 3\ne: 4\n", 4},
		{"unclosed quote", "a: 1\nb: \"open\nc: 2\n", 2},
		{"unknown anchor", "a: 1\nb: *nowhere\n", 2},
		{"tab", "a:\n\tb: 1\n", 2},
		{"deep in a long file", "list:\n" + strings.Repeat("  - x\n", 500) + "  - y: [1, 2\n", 502},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(tt.doc)
			r := yamlline.NewReader(data)
			var n yaml.Node
			err := yaml.NewDecoder(r).Decode(&n)
			if err == nil {
				t.Fatal("no error")
			}
			line, msg := yamlline.Locate(data, err, r.Offset())
			if line != tt.line || msg == "" || strings.HasPrefix(msg, "yaml: ") {
				t.Errorf("line %d, message %q (library: %v); want line %d", line, msg, err, tt.line)
			}
		})
	}
}

func TestLineText(t *testing.T) {
	data := []byte("one\ntwo\nthree")
	for n, want := range map[int]string{1: "one", 2: "two", 3: "three", 4: ""} {
		if got := string(yamlline.LineText(data, n)); got != want {
			t.Errorf("line %d: %q, want %q", n, got, want)
		}
	}
}
