package workflow

import (
	"errors"
	"fmt"
	"strings"
)

// This file substitutes variables into run commands, quoting each value
// for the place where it stands (the rules are in the package
// documentation, "Values in run commands"). A small scanner follows the
// shell's quoting across the command's own text, as a stack of frames:
// unquoted text, '...', "...", the shell's ${...}, $((...)), `...` and
// comments. A value is always a word or a part of one, quoted so that it
// never closes the frame it stands in: the scanner reads the command's
// text only, and its state after a value is its state before, in a
// word. A value right after \, $, $name or ~ would join them, and is
// refused whatever it is. The values
// of ${name:raw} are read as the command's text is, since they are
// shell text. Where the shells differ or the scanner would need to parse
// more than quoting (inside `...`, ${...} and $((...)); after <<, $'...'
// or a case inside $(...)), it pastes only a value of literal bytes and
// refuses others, rather than guess.

// literalByte reports, for each byte, whether it means itself wherever
// it stands in a command, quoted or not, whatever is around it: the
// bytes of the plain words that package execflow executes without a
// shell, less = (which makes an assignment of a first word) and % (which
// ${x%pattern} would take for an operator).
var literalByte = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "_-./,:+@" {
		t[c] = true
	}
	return t
}()

// literal reports whether every byte of v is a literal byte.
func literal(v string) bool {
	for i := 0; i < len(v); i++ {
		if !literalByte[v[i]] {
			return false
		}
	}
	return true
}

// runPart is a piece of a run command: shell text (the command's own,
// and the values of ${name:raw}), or a value to quote, ref as written.
type runPart struct {
	text       string
	ref, value string // ref is "" for text
}

// substituteRun replaces the references of the run command s by the
// values of vars, each quoted for where it stands (see above). Only
// ${name} with a valid variable name (and ${name.stem} and the like,
// and those with :raw) is a reference; every other use of $ is left for
// the shell, except that $${ becomes ${. An unknown reference, a value
// that cannot be quoted where it stands, and a command with a NUL byte
// are errors.
func substituteRun(s string, vars scope) (string, error) {
	out := s
	if strings.Contains(s, "${") {
		parts, err := splitRun(s, vars)
		if err != nil {
			return "", err
		}
		if out, err = quoteRun(parts); err != nil {
			return "", err
		}
	}
	if strings.IndexByte(out, 0) >= 0 {
		return "", errNUL
	}
	return out, nil
}

// errNUL is the error of a run command with a NUL byte, which the
// system cannot pass to a program.
var errNUL = errors.New("the command holds a NUL byte, which no command can take")

// splitRun splits the run command s into shell text and references,
// merging the values of ${name:raw} into the text around them.
func splitRun(s string, vars scope) ([]runPart, error) {
	var parts []runPart
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		rest := s[i:]
		switch {
		case rest[0] != '$':
			b.WriteByte(rest[0])
			i++
			continue
		case strings.HasPrefix(rest, "$${"):
			b.WriteString("${")
			i += 3
			continue
		case strings.HasPrefix(rest, "$$"):
			b.WriteString("$$")
			i += 2
			continue
		case !strings.HasPrefix(rest, "${"):
			b.WriteByte('$')
			i++
			continue
		}
		end := strings.IndexByte(rest, '}')
		if end < 0 || !validRef(rest[2:end]) {
			b.WriteString("${")
			i += 2
			continue
		}
		ref := rest[:end+1]
		inner, raw := strings.CutSuffix(rest[2:end], ":raw")
		v, ok := lookup(vars, inner)
		if !ok {
			return nil, &substError{ref: ref, shell: true}
		}
		i += end + 1
		if raw {
			b.WriteString(v)
			continue
		}
		parts = append(parts, runPart{text: b.String()}, runPart{ref: ref, value: v})
		b.Reset()
	}
	return append(parts, runPart{text: b.String()}), nil
}

// quoteError is a value that cannot be quoted where it stands.
type quoteError struct {
	ref, value string
	why        string // where it stands: "inside `...`"
}

func (e *quoteError) Error() string {
	name := e.ref[2 : len(e.ref)-1]
	return fmt.Sprintf("%s is %q, which poolrun cannot quote %s: assign it to a shell variable first (v=%s; ... \"$v\") or write ${%s:raw}",
		e.ref, e.value, e.why, e.ref, name)
}

// joinError is a reference right after text that its value would join:
// a \ or a $ (which would take its first byte), a $name (which it
// would lengthen) or ~ (which would take it for a user's name).
type joinError struct {
	ref, before string
}

func (e *joinError) Error() string {
	name := e.ref[2 : len(e.ref)-1]
	var why string
	switch {
	case e.before == `\`:
		why = fmt.Sprintf(`the \ would escape the value's first character: write $${%s} for the shell's own ${%[1]s}`, name)
	case e.before == "$":
		why = "the $ would take the value's first character"
	case e.before == "~":
		why = fmt.Sprintf(`~ would take the value for a user's name: write ${%s:raw} for that, or "~"${%[1]s} for the text`, name)
	default:
		why = fmt.Sprintf("the value would lengthen the name of %s: write ${%s:raw} for that, or $${%s}${%[2]s} for the text", e.before, name, e.before[1:])
	}
	return e.before + e.ref + ": " + why
}

// quoteRun joins parts, quoting each value for where it stands.
func quoteRun(parts []runPart) (string, error) {
	if len(parts) == 1 {
		return parts[0].text, nil
	}
	var b strings.Builder
	q := quoter{stack: []frame{{kind: inCommand}}}
	for i, p := range parts {
		if p.ref == "" {
			q.scan(p.text, i < len(parts)-1)
			b.WriteString(p.text)
			continue
		}
		v, err := q.quote(p.ref, p.value)
		if err != nil {
			return "", err
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

// A frame is one level of the shell's quoting.
type frame struct {
	kind   byte   // one of the in... constants
	unsure string // where a value cannot be quoted ("inside `...`"), "" if it can
	nested bool   // inCommand: opened by ( or $(, closed by )
	dollar bool   // inCommand: opened by $(, a part of a word once closed
	word   bool   // inCommand: in a word, where # does not start a comment
	quoted bool   // inParam: inside "..."
}

// The kinds of frame.
const (
	inCommand   = 'c' // unquoted: the top, $(...) and (...)
	inSingle    = 's' // '...'
	inDouble    = 'd' // "..."
	inParam     = 'p' // the shell's own ${...}
	inArith     = 'a' // $((...)) and the (...) inside
	inBackquote = 'b' // `...`
	inComment   = '#' // from # to the end of the line
)

// quoter follows the shell's quoting across a command.
type quoter struct {
	stack []frame
	lost  string // why the scanner no longer knows the quoting, "" if it does
	// pending is the end of the text before a value that the value
	// would join, "" if none: \ or $ (which would take its first byte),
	// $name (which it would lengthen) or an unquoted ~ (which would take
	// it for a user's name).
	pending string
}

func (q *quoter) top() *frame { return &q.stack[len(q.stack)-1] }

// push opens a frame of kind, which inherits the unsure of the frame
// around it, or has unsure if that has none.
func (q *quoter) push(kind byte, unsure string) *frame {
	if u := q.top().unsure; u != "" {
		unsure = u
	}
	q.stack = append(q.stack, frame{kind: kind, unsure: unsure})
	return q.top()
}

func (q *quoter) pop() {
	if len(q.stack) > 1 {
		q.stack = q.stack[:len(q.stack)-1]
	}
}

// endsWord reports whether c ends a word: a blank, a newline or one of
// the shell's operators.
func endsWord(c byte) bool {
	return strings.IndexByte(" \t\n;&|()<>", c) >= 0
}

// scan reads s, shell text. more says whether a value follows it.
func (q *quoter) scan(s string, more bool) {
	q.pending = ""
	for i := 0; i < len(s); {
		f := q.top()
		c := s[i]
		switch f.kind {
		case inSingle:
			if c == '\'' {
				q.pop()
			}
			i++
			continue
		case inComment:
			if c == '\n' {
				q.pop() // the newline ends a word of the frame below
				continue
			}
			i++
			continue
		case inBackquote:
			switch c {
			case '\\':
				i = q.escape(s, i, more)
			case '`':
				q.pop()
				i++
			case '$': // for the pending $ and $name of the shell inside
				i = q.name(s, i, more)
			case '~':
				if i+1 == len(s) && more {
					q.pending = "~"
				}
				i++
			default:
				i++
			}
			continue
		}
		// inCommand, inDouble, inParam, inArith.
		switch {
		case c == '\\':
			if f.kind == inCommand && (i+1 >= len(s) || s[i+1] != '\n') {
				f.word = true
			}
			i = q.escape(s, i, more)
			continue
		case c == '$':
			if f.kind == inCommand {
				f.word = true
			}
			i = q.dollar(s, i, more)
			continue
		case c == '`':
			if f.kind == inCommand {
				f.word = true
			}
			q.push(inBackquote, "inside `...`")
			i++
			continue
		case c == '"' && f.kind != inDouble:
			if f.kind == inCommand {
				f.word = true
			}
			q.push(inDouble, "")
			i++
			continue
		case c == '\'' && f.kind != inDouble:
			if f.kind == inParam && f.quoted {
				// Inside "${...}", dash takes ' for itself and bash
				// for a quote.
				q.lose("after ' inside \"${...}\"")
				i++
				continue
			}
			if f.kind == inCommand {
				f.word = true
			}
			q.push(inSingle, "")
			i++
			continue
		}
		switch f.kind {
		case inDouble:
			if c == '"' {
				q.pop()
			}
		case inParam:
			if c == '}' {
				q.pop()
			}
		case inArith:
			switch c {
			case '(':
				q.push(inArith, "")
			case ')':
				q.pop()
			}
		case inCommand:
			q.command(s, i, more)
		}
		i++
	}
}

// command reads the byte s[i] of unquoted text that is none of \ $ ` "
// and '.
func (q *quoter) command(s string, i int, more bool) {
	f := q.top()
	c := s[i]
	switch {
	case c == '#' && !f.word:
		q.push(inComment, "")
	case c == '(':
		f.word = false
		q.push(inCommand, "").nested = true
	case c == ')':
		f.word = false
		if f.nested {
			dollar := f.dollar
			q.pop()
			q.top().word = dollar
		}
	case c == '<' && i+1 < len(s) && s[i+1] == '<':
		q.lose("after a << here-document")
	case c == '~' && i+1 == len(s) && more:
		q.pending = "~"
		f.word = true
	case endsWord(c):
		f.word = false
	case !f.word && len(q.stack) > 1 && strings.HasPrefix(s[i:], "case") &&
		(i+4 < len(s) && endsWord(s[i+4]) || i+4 == len(s) && !more):
		// A pattern of case ends in a ) that does not close $( or (.
		q.lose("after case inside $(...) or (...)")
		f.word = true
	default:
		f.word = true
	}
}

// escape reads the \ at s[i] and the byte it escapes, and returns the
// index after them.
func (q *quoter) escape(s string, i int, more bool) int {
	if i+1 < len(s) {
		return i + 2
	}
	if more {
		q.pending = `\`
	}
	return i + 1
}

// dollar reads the $ at s[i] and what it opens, and returns the index
// after them.
func (q *quoter) dollar(s string, i int, more bool) int {
	f := q.top()
	if i+1 >= len(s) || nameByte(s[i+1]) && !isDigit(s[i+1]) {
		return q.name(s, i, more)
	}
	switch s[i+1] {
	case '{':
		quoted := f.kind == inDouble || f.kind == inParam && f.quoted
		q.push(inParam, "inside ${...}").quoted = quoted
		return i + 2
	case '(':
		if i+2 < len(s) && s[i+2] == '(' {
			q.push(inArith, "inside $((...))")
			q.push(inArith, "")
			return i + 3
		}
		g := q.push(inCommand, "")
		g.nested, g.dollar = true, true
		return i + 2
	case '$':
		return i + 2
	case '\'':
		if f.kind != inDouble {
			q.lose("after $'...'")
			q.push(inSingle, "")
			return i + 2
		}
	}
	return i + 1
}

// name reads the $ at s[i] and the name after it, if any, and returns
// the index after them.
func (q *quoter) name(s string, i int, more bool) int {
	j := i + 1
	if j < len(s) && !isDigit(s[j]) {
		for j < len(s) && nameByte(s[j]) {
			j++
		}
	}
	if j == len(s) && more {
		q.pending = s[i:]
	}
	return j
}

// lose records that the scanner no longer knows the quoting, and why.
func (q *quoter) lose(why string) {
	if q.lost == "" {
		q.lost = why
	}
}

// quote returns value, the value of ref, quoted for where the scanner
// stands.
func (q *quoter) quote(ref, value string) (string, error) {
	f := q.top()
	if q.pending != "" {
		return "", &joinError{ref: ref, before: q.pending}
	}
	why := q.lost
	if why == "" {
		why = f.unsure
	}
	switch {
	case why != "":
		if !literal(value) {
			return "", &quoteError{ref: ref, value: value, why: why}
		}
		return value, nil
	case f.kind == inSingle:
		return strings.ReplaceAll(value, "'", `'\''`), nil
	case f.kind == inDouble:
		return escapeDouble(value), nil
	case f.kind == inComment:
		return strings.ReplaceAll(value, "\n", "\n#"), nil
	}
	// inCommand: the other kinds are unsure.
	f.word = true
	if value != "" && literal(value) {
		return value, nil
	}
	return "'" + strings.ReplaceAll(value, "'", `'\''`) + "'", nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// nameByte reports whether c may be part of the name of a shell
// variable.
func nameByte(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// escapeDouble puts a backslash before each byte of v that is special
// inside "...".
func escapeDouble(v string) string {
	if !strings.ContainsAny(v, "\\$`\"") {
		return v
	}
	var b strings.Builder
	b.Grow(len(v) + 8)
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '\\' || c == '$' || c == '`' || c == '"' {
			b.WriteByte('\\')
		}
		b.WriteByte(v[i])
	}
	return b.String()
}
