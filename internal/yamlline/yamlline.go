// Package yamlline finds the line of an error of the YAML library
// (go.yaml.in/yaml/v3) in the document it decoded, for messages of the
// form FILE:LINE. The library's own line is not reliable: for many errors
// it is the line before the start of the enclosing block, which can be far
// above the mistake, and some errors have none.
//
// The line is found by cutting the data after a line and decoding the cut:
// a line C such that the cut after C fails with the same error (line
// included, as the library's line does not depend on what follows) and the
// cut after C-1 does not. Parsing stops at the first error, so every cut
// after the last line the library read fails that way; and the library,
// given the data a line at a time ([Reader]), reads only a few tokens
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
	"io"
	"regexp"
	"sort"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// A Reader hands out data at most one line per Read, so that the YAML
// library, which reads only as far as it needs, has read little beyond
// its first error when it reports it.
type Reader struct {
	data []byte
	off  int // bytes handed out
}

// NewReader returns a Reader of data.
func NewReader(data []byte) *Reader { return &Reader{data: data} }

// Offset returns the number of bytes handed out so far.
func (r *Reader) Offset() int { return r.off }

func (r *Reader) Read(b []byte) (int, error) {
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

// Locate returns the line (from 1) of err, which the library returned
// while decoding data read through a Reader that had handed out read
// bytes, and err's message without the library's "yaml: line N: " prefix.
func Locate(data []byte, err error, read int) (line int, msg string) {
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
	msg = full
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
	return hi, msg
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
	dec := yaml.NewDecoder(NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			return err.Error() == msg
		}
	}
}
