// Package yamlline decodes data that holds one YAML document with the YAML
// library (go.yaml.in/yaml/v3) and finds the line of its error, for
// messages of the form FILE:LINE. The library's own line is not reliable:
// for many errors it is the line before the start of the enclosing block,
// which can be far above the mistake, and some errors have none.
//
// The line is found by cutting the data after a line and decoding the cut:
// a line C such that the cut after C fails with the same error (line
// included, as the library's line does not depend on what follows) and the
// cut after C-1 does not. Parsing stops at the first error, so every cut
// after the last line the library read fails that way; and the library,
// given the data a line at a time, reads only a few tokens
// ahead, so the search starts there and goes back, and usually ends after
// one cut. The library's own line is tried first, and kept if its cut
// fails the same way: for an unclosed quote, say, it is the line that
// opens the quote. Each cut costs a parse of the data up to that line; a
// search that goes back further than a few lines halves its interval at
// each step, so it never costs more than about twice the logarithm of the
// number of lines read.
package yamlline

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"sort"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// An Error is an error of the YAML library in decoding data, at the line
// found in data.
type Error struct {
	Line int    // from 1
	Msg  string // the library's message, without its "yaml: line N: " prefix
}

// Error returns "line LINE: MSG".
func (e *Error) Error() string { return "line " + strconv.Itoa(e.Line) + ": " + e.Msg }

// Decode decodes data, which should hold one YAML document at most. It
// returns the document's node (of kind [yaml.DocumentNode]), or nil if
// data holds none; if another document follows, next is the line where it
// starts, and 0 otherwise. An error of the library, in the first document
// or in what follows it, is returned as an [*Error].
func Decode(data []byte) (doc *yaml.Node, next int, err error) {
	r := &reader{data: data}
	dec := yaml.NewDecoder(r)
	var first yaml.Node
	if err := dec.Decode(&first); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, 0, nil
		}
		return nil, 0, locate(data, err, r.off)
	}
	var second yaml.Node
	switch err := dec.Decode(&second); {
	case err == nil:
		next = second.Line
	case !errors.Is(err, io.EOF):
		return nil, 0, locate(data, err, r.off)
	}
	return &first, next, nil
}

// A reader hands out data at most one line per Read, so that the YAML
// library, which reads only as far as it needs, has read little beyond
// its first error when it reports it.
type reader struct {
	data []byte
	off  int // bytes handed out
}

func (r *reader) Read(b []byte) (int, error) {
	if r.off == len(r.data) {
		return 0, io.EOF
	}
	rest := r.data[r.off:]
	if i := bytes.IndexByte(rest, '\n'); i >= 0 {
		rest = rest[:i+1]
	}
	n := copy(b, rest)
	r.off += n
	return n, nil
}

// libraryLine matches the line that the library puts in some errors.
var libraryLine = regexp.MustCompile(`^yaml: (?:line ([0-9]+): )?`)

// locate returns err, which the library returned while decoding data read
// through a reader that had handed out read bytes, as an *Error at its
// line.
func locate(data []byte, err error, read int) *Error {
	full := err.Error()
	var ends []int // ends[i] is the end of line i+1, its newline included
	for i, j := 0, 0; j >= 0; i += j + 1 {
		if j = bytes.IndexByte(data[i:], '\n'); j >= 0 {
			ends = append(ends, i+j+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	fails := func(line int) bool { return failsWith(data[:ends[line-1]], full) }

	// Look for the line in [lo, hi]; the cut after hi fails as data does.
	lo, hi := 1, min(sort.SearchInts(ends, max(read, 1))+1, len(ends))
	msg := full
	if m := libraryLine.FindStringSubmatch(full); m != nil {
		msg = full[len(m[0]):]
		if n, _ := strconv.Atoi(m[1]); n >= 1 && n < hi {
			if fails(n) {
				lo, hi = n, n
			} else {
				lo = n + 1
			}
		}
	}
	// Back from hi, one line, then two, four...
	for step := 1; lo < hi; step *= 2 {
		c := max(hi-step, lo)
		if !fails(c) {
			lo = c + 1
			break
		}
		hi = c
	}
	for lo < hi {
		if c := lo + (hi-lo)/2; fails(c) {
			hi = c
		} else {
			lo = c + 1
		}
	}
	return &Error{Line: hi, Msg: msg}
}

// LineText returns line n (from 1) of data, without its newline.
func LineText(data []byte, n int) []byte {
	for i := 1; i < n; i++ {
		j := bytes.IndexByte(data, '\n')
		if j < 0 {
			return nil
		}
		data = data[j+1:]
	}
	if j := bytes.IndexByte(data, '\n'); j >= 0 {
		data = data[:j]
	}
	return data
}

// failsWith reports whether decoding the documents of data, one after the
// other, ends in the error msg. It reads data as the first decoding did,
// a line at a time, which decides where the library notices a bad byte.
func failsWith(data []byte, msg string) bool {
	dec := yaml.NewDecoder(&reader{data: data})
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			return err.Error() == msg
		}
	}
}
