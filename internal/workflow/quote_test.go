package workflow_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/internal/workflow"
)

// oddValues are values that would be shell code, or would be split or
// changed, if pasted into a command as they are.
var oddValues = []string{
	"plain", "data/a.csv", "", "a b", "  two  spaces ", "it's", `say "hi"`, `'`, `"`, `''`, `"'"'`,
	"$HOME", "${HOME}", "$(touch PWNED)", "`touch PWNED`", "x;touch PWNED", "x && touch PWNED",
	`back\slash`, `ends\`, `\\`, `\'`, `\"`, "\\\nafter", "new\nline", "\n", "tab\there",
	"*", "?", "[a]", "~", "~root", "#x", "a=b", "-n", "}", ")", "(", "$'a'", `$"a"`, "<<EOF", "%x",
	"é", "\x01\x7f\xff",
}

// shells are the shells that run the commands of the tests: /bin/sh,
// which poolrun runs, and bash, whose quoting differs in places, if the
// machine has it.
func shells(t *testing.T) [][]string {
	list := [][]string{{"/bin/sh", "-c"}}
	if bash, err := exec.LookPath("bash"); err == nil {
		list = append(list, []string{bash, "-c"}, []string{bash, "--posix", "-c"})
	}
	return list
}

// runShell runs command with sh in dir, and returns what it printed.
func runShell(t *testing.T, sh []string, dir, command string) string {
	t.Helper()
	cmd := exec.Command(sh[0], append(sh[1:], command)...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %q: %v", sh[0], command, err)
	}
	return string(out)
}

// runWorkflow is a workflow with one job, whose command is run, indented.
func runWorkflow(run string) string {
	return "jobs:\n  - id: a\n    run: |-\n      " + strings.ReplaceAll(run, "\n", "\n      ") + "\n"
}

// A value reaches the command as exactly its bytes, whether it stands
// unquoted, inside '...' or inside "...", and whatever surrounds it: each
// command prints each value it is given, followed by |, with printf.
func TestRunValuesAreText(t *testing.T) {
	tests := []struct {
		name string
		run  string
		want string // with V for the value
	}{
		{"bare", `printf '%s|' ${v}`, "V|"},
		{"double quotes", `printf '%s|' "${v}"`, "V|"},
		{"single quotes", `printf '%s|' '${v}'`, "V|"},
		{"parts of words", `printf '%s|' x${v}y "x${v}y" 'x${v}y' x"${v}"'${v}'${v}`, "xVy|xVy|xVy|xVVV|"},
		{"twice in a word", `printf '%s|' ${v}${v} "${v}${v}" '${v}${v}'`, "VV|VV|VV|"},
		{"quotes of the other kind", `printf '%s|' "a'${v}'b" 'a"${v}"b'`, "a'V'b|a\"V\"b|"},
		{"escaped quotes around", `printf '%s|' \'${v}\' "\"${v}\""`, "'V'|\"V\"|"},
		{"inside $(...)", `printf '%s|' "$(printf '%s' ${v}x)" "$(printf '%s' "${v}"x)" "$(printf '%s' '${v}'x)"`, "Vx|Vx|Vx|"},
		{"inside $(...) inside \"...\" inside $(...)", `printf '%s|' "$(printf '%s' "$(printf '%s' '${v}'x)")"`, "Vx|"},
		{"inside a subshell", `(printf '%s|' ${v}) && { printf '%s|' "${v}"; }`, "V|V|"},
		{"after a comment with a quote", "# don't ${v} \"\nprintf '%s|' ${v} # it's ${v}\nprintf '%s|' \"${v}\"", "V|V|"},
		{"a # in a word is no comment", `printf '%s|' a#${v} "${v}"#'x'`, "a#V|V#x|"},
		{"after a shell variable", `x=1; printf '%s|' $${x}${v} "$${x}${v}" $x-${v} $1${v}`, "1V|1V|1-V|V|"},
		{"after ~", `printf '%s|' "~"${v} a=\~${v} '~'${v}/x`, "~V|a=~V|~V/x|"},
		{"case at the top", `case x in x) printf '%s|' ${v};; esac`, "V|"},
		{"an assignment", `x=${v}; y="${v}"; printf '%s|' "$x" "$y"`, "V|V|"},
		{"lines", "printf '%s|' ${v}\nprintf '%s|' \"${v}\" \\\n  '${v}'", "V|V|V|"},
		{"$${ is the shell's", `v=x; printf '%s|' "$${v}" ${v}`, "x|V|"},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// One script runs the command of every value, each followed
			// by a byte that no value holds, so that each shell starts
			// once.
			const end = "\x1e"
			var script strings.Builder
			text := runWorkflow(tt.run)
			for _, v := range oddValues {
				w, err := workflow.ParseWith(filepath.Join(dir, "wf.yaml"), []byte(text), workflow.Options{Set: map[string]string{"v": v}})
				if err != nil {
					t.Fatalf("value %q: %v", v, err)
				}
				script.WriteString(w.Jobs[0].Run + "\nprintf '" + end + "'\n")
			}
			for _, sh := range shells(t) {
				got := strings.Split(runShell(t, sh, dir, script.String()), end)
				if len(got) != len(oddValues)+1 {
					t.Fatalf("%s printed %d parts, want %d: %q", sh, len(got), len(oddValues)+1, got)
				}
				for i, v := range oddValues {
					if want := strings.ReplaceAll(tt.want, "V", v); got[i] != want {
						t.Errorf("%s, value %q: printed %q, want %q", sh, v, got[i], want)
					}
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "PWNED")); err == nil {
				t.Fatal("a value ran as shell code")
			}
		})
	}
}

// Items' commands and the parts of a path (.stem, .name, .dir) are quoted
// as values are.
func TestRunItemsAndPartsAreText(t *testing.T) {
	const text = `
vars: {v: x}
items:
  it:
    run: printf '%s|' ${v} "${v.stem}" '${v.dir}' > "$POOLRUN_ITEM"
jobs:
  - id: a
    run: printf '%s|' ${v.name} "${v.name}" '${v.stem}' ${v.dir}
    needs: [it]
`
	dir := t.TempDir()
	v := "it's a $(dir)/the `x` \"file\".tar.gz"
	w, err := workflow.ParseWith(filepath.Join(dir, "wf.yaml"), yamlText(text), workflow.Options{Set: map[string]string{"v": v}})
	if err != nil {
		t.Fatal(err)
	}
	item := strings.TrimSuffix(w.Items[0].Run, ` > "$POOLRUN_ITEM"`)
	if got, want := runShell(t, []string{"/bin/sh", "-c"}, dir, item), v+`|the `+"`x`"+` "file".tar|it's a $(dir)|`; got != want {
		t.Errorf("item printed %q, want %q", got, want)
	}
	want := "the `x` \"file\".tar.gz|the `x` \"file\".tar.gz|the `x` \"file\".tar|it's a $(dir)|"
	if got := runShell(t, []string{"/bin/sh", "-c"}, dir, w.Jobs[0].Run); got != want {
		t.Errorf("job printed %q, want %q", got, want)
	}
}

// A plain value is pasted as it is, so that a command of plain words is
// still one that execflow executes without a shell; any other is quoted.
func TestRunQuotesOnlyWhatNeedsIt(t *testing.T) {
	tests := []struct{ v, want string }{
		{"data/a-1.csv", "cp data/a-1.csv out"},
		{"a,b:c+d@e_f", "cp a,b:c+d@e_f out"},
		{"a b", "cp 'a b' out"},
		{"", "cp '' out"},
		{"a=b", "cp 'a=b' out"},
		{"it's", `cp 'it'\''s' out`},
	}
	for _, tt := range tests {
		w, err := workflow.ParseWith("wf.yaml", []byte(runWorkflow("cp ${v} out")), workflow.Options{Set: map[string]string{"v": tt.v}})
		if err != nil {
			t.Fatal(err)
		}
		if got := w.Jobs[0].Run; got != tt.want {
			t.Errorf("value %q: %s, want %s", tt.v, got, tt.want)
		}
	}
}

// ${name:raw} pastes the value as shell text, and the quoting of the
// values after it follows that text.
func TestRunRaw(t *testing.T) {
	tests := []struct {
		name string
		run  string
		set  map[string]string
		want string
	}{
		{"words", `${a:raw} "${v}"`, map[string]string{"a": `printf '%s|' x "y z"`, "v": "$(v)"}, "x|y z|$(v)|"},
		{"shell code", `printf '%s|' ${a:raw}`, map[string]string{"a": `$(echo 1) $((1+1))`}, "1|2|"},
		{"a quote opened by a raw value", `printf '%s|' ${q:raw}${v}${q:raw} ${v}`, map[string]string{"q": `"`, "v": "a $b"}, "a $b|a $b|"},
		{"a single quote opened by a raw value", `printf '%s|' ${q:raw}${v}${q:raw} ${v}`, map[string]string{"q": `'`, "v": "it's"}, "it's|it's|"},
		{"a comment opened by a raw value", "printf '%s|' ${v} ${c:raw} ${v}\nprintf '%s|' ${v}", map[string]string{"c": `#`, "v": "a\nb"}, "a\nb|a\nb|"},
		{"parts", `printf '%s|' ${f.stem:raw} ${f.stem}`, map[string]string{"f": "d/x y.txt"}, "x|y|x y|"},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := workflow.ParseWith(filepath.Join(dir, "wf.yaml"), []byte(runWorkflow(tt.run)), workflow.Options{Set: tt.set})
			if err != nil {
				t.Fatal(err)
			}
			for _, sh := range shells(t) {
				if got := runShell(t, sh, dir, w.Jobs[0].Run); got != tt.want {
					t.Errorf("%s: %s\nprinted %q\nwant    %q", sh, w.Jobs[0].Run, got, tt.want)
				}
			}
		})
	}
}

// Where poolrun cannot tell how the shell will read a value, it refuses
// one that is not plain, with the line, and pastes one that is.
func TestRunValueNotQuotable(t *testing.T) {
	tests := []struct {
		name string
		run  string
		want string // in the error, after `wf.yaml:3: job "a": run: `
	}{
		{"backquotes", "echo `cat ${v}`", "${v} is \"a b\", which poolrun cannot quote inside `...`: assign it to a shell variable first (v=${v}; ... \"$v\") or write ${v:raw}"},
		{"backquotes in double quotes", "echo \"`cat '${v}'`\"", "cannot quote inside `...`"},
		{"the shell's ${...}", "echo $${X:-${v}}", "cannot quote inside ${...}"},
		{"quotes in the shell's ${...}", "echo $${X:-\"${v}\"}", "cannot quote inside ${...}"},
		{"arithmetic", "echo $((${v} + 1))", "cannot quote inside $((...))"},
		{"after a here-document", "cat <<EOF\n${v}\nEOF", "cannot quote after a << here-document"},
		{"after a quoted here-document", "cat <<'EOF'\n'${v}'\nEOF\necho \"${v}\"", "cannot quote after a << here-document"},
		{"after $'...'", "echo $'\\'' ${v}", "cannot quote after $'...'"},
		{"after case inside $(...)", "x=\"$(case a in a) echo ${v};; esac)\"", "cannot quote after case inside $(...) or (...)"},
		{"after ' inside \"${...}\"", "echo \"$${X:-'}\" \"${v}\"", "cannot quote after ' inside \"${...}\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := runWorkflow(tt.run)
			_, err := workflow.ParseWith("wf.yaml", []byte(text), workflow.Options{Set: map[string]string{"v": "a b"}})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), `wf.yaml:3: job "a": run: ${v} is "a b", which poolrun cannot quote`) {
				t.Errorf("error %v, want one with %q", err, tt.want)
			}
			w, err := workflow.ParseWith("wf.yaml", []byte(text), workflow.Options{Set: map[string]string{"v": "ab"}})
			if err != nil {
				t.Fatalf("plain value: %v", err)
			}
			if want := strings.ReplaceAll(strings.ReplaceAll(tt.run, "$${", "${"), "${v}", "ab"); w.Jobs[0].Run != want {
				t.Errorf("plain value: %q, want %q", w.Jobs[0].Run, want)
			}
		})
	}
}

func TestRunSubstitutionErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		set  map[string]string
		want string
	}{
		{"a \\ before a value", runWorkflow(`echo \${v}`), map[string]string{"v": "x"},
			`wf.yaml:3: job "a": run: \${v}: the \ would escape the value's first character: write $${v} for the shell's own ${v}`},
		{"a \\ before a value in double quotes", runWorkflow(`echo "\${v}"`), map[string]string{"v": "x"},
			`wf.yaml:3: job "a": run: \${v}: the \ would escape`},
		{"a $ of a raw value before a value", runWorkflow(`echo ${d:raw}${v}`), map[string]string{"d": "$", "v": "x"},
			`wf.yaml:3: job "a": run: $${v}: the $ would take the value's first character`},
		{"a value after $name", runWorkflow(`echo $X${v}`), map[string]string{"v": "-"},
			`wf.yaml:3: job "a": run: $X${v}: the value would lengthen the name of $X: write ${v:raw} for that, or $${X}${v} for the text`},
		{"a value after $name in double quotes", runWorkflow(`echo "$POOLRUN_ITEM_REF_${v}"`), map[string]string{"v": "1"},
			`wf.yaml:3: job "a": run: $POOLRUN_ITEM_REF_${v}: the value would lengthen`},
		{"a value after $name inside backquotes", runWorkflow("echo `echo $x${v}`"), map[string]string{"v": "ab"},
			`wf.yaml:3: job "a": run: $x${v}: the value would lengthen`},
		{"a value after ~", runWorkflow(`echo ~${v}/data`), map[string]string{"v": "me"},
			`wf.yaml:3: job "a": run: ~${v}: ~ would take the value for a user's name: write ${v:raw} for that, or "~"${v} for the text`},
		{":raw in an id", "jobs:\n  - id: a-${v:raw}\n    run: x\n", map[string]string{"v": "x"},
			`wf.yaml:2: job "a-${v:raw}": id: ${v:raw}: only a run command takes :raw (shell text)`},
		{":raw in outputs", "jobs:\n  - id: a\n    run: x\n    outputs: [\"${v:raw}\"]\n", map[string]string{"v": "x"},
			`wf.yaml:4: job "a": outputs: ${v:raw}: only a run command takes :raw (shell text)`},
		{"unknown raw, declared", "vars: {v: x}\n" + runWorkflow(`echo ${w:raw}`), nil,
			`wf.yaml:4: job "a": run: unknown variable ${w:raw} (the job has no foreach) (vars: defines v)`},
		{"NUL in the command", "jobs:\n  - id: a\n    run: \"echo a\\0b\"\n", nil,
			`wf.yaml:3: job "a": run: the command holds a NUL byte, which no command can take`},
		{"NUL from vars", "vars: {v: \"a\\0b\"}\njobs:\n  - id: a\n    run: echo ${v}\n", nil,
			`wf.yaml:4: job "a": run: the command holds a NUL byte`},
		{"NUL from --set, raw", runWorkflow(`echo ${v:raw}`), map[string]string{"v": "a\x00b"},
			`wf.yaml:3: job "a": run: the command holds a NUL byte`},
		{"NUL from foreach", "jobs:\n  - id: a-${i}\n    foreach: {i: [x], j: [\"y\\0\"]}\n    run: echo \"${j}\"\n", nil,
			`wf.yaml:4: job "a-${i}": run: the command holds a NUL byte`},
		{"NUL in an item", "items:\n  it:\n    run: \"echo \\0\"\njobs:\n  - id: a\n    run: x\n    needs: [it]\n", nil,
			`wf.yaml:3: item "it": run: the command holds a NUL byte`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := workflow.ParseWith("wf.yaml", []byte(tt.in), workflow.Options{Set: tt.set})
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error %v\nwant    %s...", err, tt.want)
			}
		})
	}
}

// A variable of --set that the file uses only as ${NAME:raw} is used.
func TestRunSetUsedRaw(t *testing.T) {
	w, err := workflow.ParseWith("wf.yaml", []byte(runWorkflow("echo ${v:raw}")), workflow.Options{Set: map[string]string{"v": "a  b"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Jobs[0].Run; got != "echo a  b" {
		t.Errorf("%q", got)
	}
}

func ExampleParseWith_values() {
	const file = `
jobs:
  - id: count
    run: wc ${opts:raw} < ${f} > "${f}.n"
`
	set := map[string]string{"f": `it's "$x".csv`, "opts": "-l -w"}
	w, err := workflow.ParseWith("wf.yaml", []byte(file), workflow.Options{Set: set})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(w.Jobs[0].Run)
	// Output: wc -l -w < 'it'\''s "$x".csv' > "it's \"\$x\".csv.n"
}

// Whatever its bytes, a value reaches the command as exactly those bytes,
// unquoted, inside "..." and inside '...'. Only the seeds run as a test;
// go test -fuzz FuzzRunValueIsText looks for more.
func FuzzRunValueIsText(f *testing.F) {
	for _, v := range oddValues {
		f.Add(v)
	}
	const run = `printf '%s|' ${v} "${v}" '${v}' "$(printf '%s' ${v}x)" a${v}"b${v}"'c${v}'`
	text := []byte(runWorkflow(run))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, v string) {
		if strings.IndexByte(v, 0) >= 0 {
			t.Skip("no command can take a NUL byte")
		}
		w, err := workflow.ParseWith(filepath.Join(dir, "wf.yaml"), text, workflow.Options{Set: map[string]string{"v": v}})
		if err != nil {
			t.Fatalf("value %q: %v", v, err)
		}
		want := strings.Repeat(v+"|", 3) + v + "x|a" + v + "b" + v + "c" + v + "|"
		if got := runShell(t, []string{"/bin/sh", "-c"}, dir, w.Jobs[0].Run); got != want {
			t.Fatalf("value %q: %s\nprinted %q\nwant    %q", v, w.Jobs[0].Run, got, want)
		}
	})
}
