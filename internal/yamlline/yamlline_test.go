package yamlline_test

import (
	"errors"
	"fmt"
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
		{"in a second document", "a: 1\n---\nb: 2\nc: [\n", 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc, next, err := yamlline.Decode([]byte(tt.doc))
			var e *yamlline.Error
			if !errors.As(err, &e) || doc != nil || next != 0 {
				t.Fatalf("Decode = %v, %d, %v; want an *Error", doc, next, err)
			}
			if e.Line != tt.line || e.Msg == "" || strings.HasPrefix(e.Msg, "yaml: ") || e.Error() != fmt.Sprintf("line %d: %s", e.Line, e.Msg) {
				t.Errorf("%q at line %d; want line %d", e.Msg, e.Line, tt.line)
			}
		})
	}
}

// TestDecode: no document is a nil node, one its node, and a second one
// is found at its line.
func TestDecode(t *testing.T) {
	for _, tt := range []struct {
		name, data string
		doc        bool
		next       int
	}{
		{"empty", "", false, 0},
		{"a comment", "# nothing\n", false, 0},
		{"one document", "a: 1\nb: 2\n", true, 0},
		{"two documents", "a: 1\n---\nb: 2\n", true, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc, next, err := yamlline.Decode([]byte(tt.data))
			if err != nil || (doc != nil) != tt.doc || next != tt.next {
				t.Fatalf("Decode = %v, %d, %v; want a document %v, next %d", doc, next, err, tt.doc, tt.next)
			}
			if doc != nil && (doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Content[0].Value != "a") {
				t.Errorf("the document is not that of a: %+v", doc)
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
