package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tests of this file are the repros of issue 33 about shell
// quoting, run with the real binary: a value of --set, vars: or foreach
// (a file's name included) reaches the command as text, never as shell
// code; ${name:raw} pastes shell text on purpose.

// noPwned fails the test if a command ran touch PWNED in dir or below.
func noPwned(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "PWNED" {
			t.Errorf("a value ran as shell code: %s exists", path)
		}
		return nil
	})
}

// readFile returns the content of dir/name, failing the test if it
// cannot be read.
func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// poolrun run --set 'name=$(touch PWNED)' does not run touch.
func TestRunSetValueIsText(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.yaml": `jobs:
  - id: bare
    run: echo ${name} > bare.txt
  - id: double
    run: echo "${name}" > double.txt
`})
	const value = "$(touch PWNED) `touch PWNED`; touch PWNED"
	if r := poolrun(t, dir, "run", "--set", "name="+value, "wf.yaml"); r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	noPwned(t, dir)
	for _, name := range []string{"bare.txt", "double.txt"} {
		if got := readFile(t, dir, name); got != value+"\n" {
			t.Errorf("%s: %q, want %q", name, got, value+"\n")
		}
	}
}

// A folder named $(touch PWNED) under a foreach glob is a name, even in
// a command that writes "${f}".
func TestRunForeachNameIsText(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"wf.yaml": `jobs:
  - id: see
    foreach: {f: "data/*"}
    run: printf '%s' "${f}" > seen.txt
`,
		"data/$(touch PWNED)/x": "",
	})
	if r := poolrun(t, dir, "run", "wf.yaml"); r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	noPwned(t, dir)
	if got, want := readFile(t, dir, "seen.txt"), "data/$(touch PWNED)"; got != want {
		t.Errorf("the command saw %q, want %q", got, want)
	}
}

// A file's name with every byte the shell reads reaches the command
// exactly, unquoted, inside "..." and inside '...'; a plain name still
// makes a command that poolrun executes without a shell.
func TestRunOddNamesAreText(t *testing.T) {
	dir := t.TempDir()
	odd := "it's a \"b\" $HOME `id` $(id) back\\slash\tand\nnewline *"
	writeFiles(t, dir, map[string]string{
		"wf.yaml": `jobs:
  - id: bare
    foreach: {f: "odd/*"}
    run: printf '%s' ${f} > bare.txt
  - id: double
    foreach: {f: "odd/*"}
    run: printf '%s' "${f}" > double.txt
  - id: single
    foreach: {f: "odd/*"}
    run: printf '%s' '${f}' > single.txt
  - id: copy
    foreach: {f: "odd/*"}
    run: cp ${f} copy.txt
  - id: copy-plain
    foreach: {f: "plain/*"}
    run: cp ${f} copy-plain.txt
`,
		"odd/" + odd:    "odd file\n",
		"plain/a-1.txt": "plain file\n",
	})
	if r := poolrun(t, dir, "run", "wf.yaml"); r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	noPwned(t, dir)
	for _, name := range []string{"bare.txt", "double.txt", "single.txt"} {
		if got := readFile(t, dir, name); got != "odd/"+odd {
			t.Errorf("%s: %q, want %q", name, got, "odd/"+odd)
		}
	}
	if got := readFile(t, dir, "copy.txt"); got != "odd file\n" {
		t.Errorf("copy.txt: %q", got)
	}
	if got := readFile(t, dir, "copy-plain.txt"); got != "plain file\n" {
		t.Errorf("copy-plain.txt: %q", got)
	}
}

// ${name:raw} pastes shell text, and the values after it are quoted as
// the text it opens requires.
func TestRunRawValue(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"wf.yaml": `vars:
  q: '"'
jobs:
  - id: raw
    run: ${code:raw} ${q:raw}${v}${q:raw} > raw.txt
`})
	r := poolrun(t, dir, "run", "--set", "code=printf '%s|' $((1+1))", "--set", "v=$(touch PWNED) x", "wf.yaml")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	noPwned(t, dir)
	if got, want := readFile(t, dir, "raw.txt"), "2|$(touch PWNED) x|"; got != want {
		t.Errorf("raw.txt: %q, want %q", got, want)
	}
}

// A NUL byte in a command, and a value that poolrun cannot quote where
// it stands, are refused before anything runs: FILE:LINE, exit status 2.
func TestRunCommandRefused(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		args []string // after "run"
		want string
	}{
		{"NUL in the command", "jobs:\n  - id: a\n    run: \"touch ran-a; echo a\\0b\"\n", nil,
			`wf.yaml:3: job "a": run: the command holds a NUL byte, which no command can take`},
		{"NUL from vars", "vars:\n  v: \"a\\0b\"\njobs:\n  - id: a\n    run: touch ran-a; echo ${v}\n", nil,
			`wf.yaml:5: job "a": run: the command holds a NUL byte, which no command can take`},
		{"NUL in an item", "items:\n  it:\n    run: \"echo \\0 > $POOLRUN_ITEM\"\njobs:\n  - id: a\n    run: touch ran-a\n    needs: [it]\n", nil,
			`wf.yaml:3: item "it": run: the command holds a NUL byte, which no command can take`},
		{"a value inside backquotes", "jobs:\n  - id: a\n    run: touch ran-a; echo `echo ${v}`\n", []string{"--set", "v=a b"},
			"wf.yaml:3: job \"a\": run: ${v} is \"a b\", which poolrun cannot quote inside `...`"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"wf.yaml": c.yaml})
			r := poolrun(t, dir, append(append([]string{"run"}, c.args...), "wf.yaml")...)
			if r.code != 2 {
				t.Errorf("exit %d, want 2\n%s", r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, c.want) {
				t.Errorf("stderr %q does not contain %q", r.stderr, c.want)
			}
			if got := ranFiles(t, dir); len(got) > 0 {
				t.Errorf("jobs ran: %q", got)
			}
		})
	}
}
