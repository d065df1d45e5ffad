package workflow

import "testing"

func TestNamesMeet(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"a.txt", "a.txt", true},
		{"a.txt", "b.txt", false},
		{"*.txt", "res-b.txt", true},
		{"*.txt", "*.csv", false},
		{"res-*", "*.txt", true},
		{"a*", "b*", false},
		{"*a", "*b", false},
		{"*a*", "*b*", true},
		{"?", "ab", false},
		{"??", "a*", true},
		{"[a-c]x", "bx", true},
		{"[a-c]x", "dx", false},
		{"[^a-c]x", "[a-c]x", false},
		{"[^a]x", "[ab]x", true},
		{"x[0-9]", "x[a-z]", false},
		{`\*`, "*", true},
		{`\*`, "a", false},
		{"*", ".git", false},
		{".*", ".git", true},
		{"*", ".*", false},
		{"[", "a", false}, // malformed
		{"*.err", "build.err", true},
	}
	for _, tt := range tests {
		if got := namesMeet(tt.a, tt.b); got != tt.want {
			t.Errorf("namesMeet(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := namesMeet(tt.b, tt.a); got != tt.want {
			t.Errorf("namesMeet(%q, %q) = %v, want %v", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestPatternsMeet(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"/w/out/*", "/w/out/a/b.txt", true}, // a folder that holds it
		{"/w/out/*.txt", "/w/out/a/b.txt", false},
		{"/w/out/a/*", "/w/out/b/*", false},
		{"/w/*/x", "/w/a/*", true},
		{"/w/src/*.c", "/w/src/main.c", true},
	}
	for _, tt := range tests {
		if got := patternsMeet(tt.a, tt.b); got != tt.want {
			t.Errorf("patternsMeet(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
