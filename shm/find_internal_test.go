//go:build linux

package shm

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestIsWindowFile(t *testing.T) {
	tests := []struct {
		name, target string
		want         bool
	}{
		{"memfd", "/memfd:poolrun-window (deleted)", true},
		{"temporary file", "/tmp/poolrun-window-0123456789abcdef (deleted)", true},
		{"temporary file not yet unlinked", "/var/tmp/poolrun-window-fedcba9876543210", true},
		{"names file", "/memfd:poolrun-names (deleted)", false},
		{"short suffix", "/tmp/poolrun-window-0123 (deleted)", false},
		{"not hexadecimal", "/tmp/poolrun-window-0123456789abcdeg (deleted)", false},
		{"upper case", "/tmp/poolrun-window-0123456789ABCDEF (deleted)", false},
		{"longer name", "/tmp/poolrun-windows", false},
		{"another memfd", "/memfd:poolrun-window-x (deleted)", false},
		{"pipe", "pipe:[32544]", false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isWindowFile(tt.target); got != tt.want {
				t.Errorf("isWindowFile(%q) = %v, want %v", tt.target, got, tt.want)
			}
		})
	}
}

func TestParseMapsLine(t *testing.T) {
	tests := []struct {
		name string
		line string
		want Held
		ok   bool
	}{
		{
			name: "memfd",
			line: "7f4e08634000-7f4e08637000 r--s 00000000 00:01 34                         /memfd:poolrun-window (deleted)",
			want: Held{Path: "7f4e08634000-7f4e08637000", FD: -1, Dev: unix.Mkdev(0, 1), Ino: 34},
			ok:   true,
		},
		{
			name: "temporary file, padded addresses",
			line: "00400000-00402000 r--s 00000000 fe:00 9982498 /tmp/poolrun-window-0123456789abcdef (deleted)",
			want: Held{Path: "400000-402000", FD: -1, Dev: unix.Mkdev(0xfe, 0), Ino: 9982498},
			ok:   true,
		},
		{name: "binary", line: "00400000-00601000 r-xp 00000000 fe:00 9982498 /tmp/insp/poolrun"},
		{name: "anonymous", line: "7f4e08634000-7f4e08637000 rw-p 00000000 00:00 0 "},
		{name: "no path", line: "7f4e08634000-7f4e08637000 rw-p 00000000 00:00 0"},
		{name: "bad device", line: "7f4e08634000-7f4e08637000 r--s 00000000 0001 34 /memfd:poolrun-window (deleted)"},
		{name: "empty", line: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseMapsLine(tt.line)
			if ok != tt.ok || got != tt.want {
				t.Errorf("parseMapsLine(%q) = %+v, %v; want %+v, %v", tt.line, got, ok, tt.want, tt.ok)
			}
		})
	}
}
