package execflow

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"strings"
	"testing"
)

func TestTailWriter(t *testing.T) {
	long := strings.Repeat("x", maxTailLine+10)
	cases := []struct {
		name   string
		n      int
		writes []string
		want   string
	}{
		{"nothing", 3, nil, ""},
		{"fewer lines", 3, []string{"a\nb\n"}, "a\nb"},
		{"more lines", 2, []string{"a\nb\nc\nd\n"}, "c\nd"},
		{"split writes", 2, []string{"a\nb", "c\nd", "e\n"}, "bc\nde"},
		{"unfinished last line", 2, []string{"a\nb\nc"}, "b\nc"},
		{"empty lines", 3, []string{"\n\na\n"}, "\n\na"},
		{"none kept", 0, []string{"a\nb\n"}, ""},
		{"long line", 2, []string{long + "\nend\n"}, long[:maxTailLine] + truncMark + "\nend"},
		{"long line in pieces", 1, []string{long[:600], long[600:] + "\n"}, long[:maxTailLine] + truncMark},
		{"ring wraps twice", 3, []string{"1\n2\n3\n4\n5\n6\n7\n"}, "5\n6\n7"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newTailWriter(c.n)
			for _, s := range c.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write: %d, %v", n, err)
				}
			}
			if got := w.String(); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestCommandErrorMessage(t *testing.T) {
	cases := []struct {
		name string
		err  commandError
		want string
	}{
		{"job", commandError{JobID: "a-1", File: "w.yaml", Line: 7, ExitCode: 2, StderrTail: "oops\nbad"},
			"job \"a-1\" (w.yaml:7): exit status 2\noops\nbad"},
		{"signal", commandError{JobID: "a", File: "w.yaml", Line: 3, ExitCode: -1, Signal: "SIGKILL"},
			`job "a" (w.yaml:3): killed by signal SIGKILL`},
		{"item of a job", commandError{JobID: "a", Item: "ref", File: "w.yaml", Line: 2, ExitCode: 1},
			`job "a": item "ref" (w.yaml:2): exit status 1`},
		{"item", commandError{Item: "ref", File: "w.yaml", Line: 2, ExitCode: 1},
			`item "ref" (w.yaml:2): exit status 1`},
		{"peak memory", commandError{JobID: "big", File: "w.yaml", Line: 4, ExitCode: 137, PeakRSS: 812000 << 10, StderrTail: "out of memory"},
			"job \"big\" (w.yaml:4): exit status 137 (peak RSS 812000 KiB)\nout of memory"},
		{"peak memory, signal", commandError{JobID: "big", File: "w.yaml", Line: 4, ExitCode: -1, Signal: "SIGKILL", PeakRSS: 1 << 30},
			`job "big" (w.yaml:4): killed by signal SIGKILL (peak RSS 1048576 KiB)`},
		{"odd file", commandError{JobID: `q"x`, File: "d (1)/w:2.yaml): x", Line: 9, ExitCode: 255, StderrTail: "job \"x\" (y:1): exit status 3"},
			"job \"q\\\"x\" (d (1)/w:2.yaml): x:9): exit status 255\njob \"x\" (y:1): exit status 3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.err.Error(); got != c.want {
				t.Errorf("Error() = %q, want %q", got, c.want)
			}
			back, ok := parseCommandError(c.err.Error())
			if !ok {
				t.Fatalf("parseCommandError(%q) failed", c.err.Error())
			}
			if *back != c.err {
				t.Errorf("parsed back as %#v", *back)
			}
		})
	}
	for _, msg := range []string{
		"", "exit status 1", `job "a": exit status 1`, `job "a" (w.yaml): exit status 1`,
		`job "a" (w.yaml:x): exit status 1`, `job "a" (w.yaml:1): exit status one`,
		`job "a" (w.yaml:1): stopped: context canceled`, `job a (w.yaml:1): exit status 1`,
		`job "a": item "b" (w.yaml:1): ` + errNoArtefact.Error(),
		`job "a" (w.yaml:1): exit status 1 (peak RSS many KiB)`,
	} {
		if ce, ok := parseCommandError(msg); ok {
			t.Errorf("parseCommandError(%q) = %#v, want failure", msg, *ce)
		}
	}
}

// TestItemParamTravels checks that an item's parameter, sent to a worker
// inside a job's argument, names and keys the same member there.
func TestItemParamTravels(t *testing.T) {
	p := itemParam{Name: "ref", Run: "echo > \"$POOLRUN_ITEM\"", File: "w.yaml", Line: 3,
		Dir: "/work", Env: "A=1\x00B=2", Scratch: "/dev/shm", TailLines: 20}
	arg := execArg{ID: "j", Items: []itemParam{p, {Name: "zero"}}}
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(arg); err != nil {
		t.Fatal(err)
	}
	var got execArg
	if err := gob.NewDecoder(&b).Decode(&got); err != nil {
		t.Fatal(err)
	}
	for i, q := range got.Items {
		if q != arg.Items[i] {
			t.Errorf("item %d: sent %#v, received %#v", i, arg.Items[i], q)
		}
		if items.Item(q) != items.Item(arg.Items[i]) {
			t.Errorf("item %d: another member after the trip", i)
		}
	}
	// Every field counts.
	seen := map[string]string{memberName(p): "p"}
	for name, q := range map[string]itemParam{
		"Name": {Name: "ref2"}, "Run": {Run: "x"}, "File": {File: "x"}, "Line": {Line: 4},
		"Dir": {Dir: "/x"}, "Env": {Env: "A=1"}, "Scratch": {Scratch: "/tmp"}, "TailLines": {TailLines: 5},
	} {
		v := p
		switch name {
		case "Name":
			v.Name = q.Name
		case "Run":
			v.Run = q.Run
		case "File":
			v.File = q.File
		case "Line":
			v.Line = q.Line
		case "Dir":
			v.Dir = q.Dir
		case "Env":
			v.Env = q.Env
		case "Scratch":
			v.Scratch = q.Scratch
		case "TailLines":
			v.TailLines = q.TailLines
		}
		n := memberName(v)
		if prev, dup := seen[n]; dup {
			t.Errorf("changing %s gives the name of %s: %s", name, prev, n)
		}
		seen[n] = name
	}
}

func TestScratchPID(t *testing.T) {
	for _, c := range []struct {
		name string
		pid  int
		ok   bool
	}{
		{"poolrun-123-456", 123, true},
		{"poolrun-1-x", 1, true},
		{"poolrun-123", 0, false},
		{"poolrun-123-", 0, false},
		{"poolrun--1-2", 0, false},
		{"poolrun-0123-4", 0, false},
		{"poolrun-12a-4", 0, false},
		{"poolrun-+12-4", 0, false},
		{"other-123-4", 0, false},
		{fmt.Sprintf("poolrun-%d0-1", int64(1)<<62), 0, false},
	} {
		pid, ok := scratchPID(c.name)
		if pid != c.pid || ok != c.ok {
			t.Errorf("scratchPID(%q) = %d, %v, want %d, %v", c.name, pid, ok, c.pid, c.ok)
		}
	}
}
