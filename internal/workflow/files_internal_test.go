package workflow

import "testing"

func TestMatchName(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "a.txt", true},
		{"*", ".git", false},
		{"*", ".hidden", false},
		{".*", ".git", true},
		{"?git", ".git", false},
		{"[.]git", ".git", false},
		{".g*", ".gitignore", true},
		{"*.txt", "a.txt", true},
		{"[", "a", false}, // malformed
	}
	for _, tt := range tests {
		if got := matchName(tt.pattern, tt.name); got != tt.want {
			t.Errorf("matchName(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}
