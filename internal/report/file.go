package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/poolrun/poolrun/internal/atomicfile"
	"github.com/poolrun/poolrun/internal/human"
	"github.com/poolrun/poolrun/internal/regfile"
)

// MaxSize bounds the report that [Load] reads, 1 GiB: a report of a
// million jobs is about 400 MiB.
const MaxSize = 1 << 30

// headSize is how much of a file Load reads before the rest: a file whose
// first bytes cannot begin a report is refused from them (see checkHead),
// not read whole.
const headSize = 64 << 10

// Write writes report r (a [*Pool] or a [*Bench]) to path as indented
// JSON, atomically: a temporary file in the same folder, renamed when
// complete.
func Write(path string, r any) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(data, '\n'))
}

// Load reads and checks the report in file path: a regular file (a named
// pipe, a device or a directory is refused at once) of JSON of at most
// [MaxSize] bytes, of a pool (version 0 to [Version]) or of a bench. A
// file whose first 64 KiB cannot begin a report is refused from them. The
// errors name the file.
func Load(path string) (*File, error) {
	data, err := readFile(path)
	var big *regfile.TooLargeError
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%s: no such file", path)
	case errors.As(err, &big):
		return nil, fmt.Errorf("%s: %d bytes, larger than %s: not a report of poolrun", path, big.Size, human.Bytes(MaxSize))
	case err != nil:
		return nil, err // names the path
	}
	return Decode(path, data)
}

// Read reads a report from r, as [Load] reads a file; name is what the
// errors call it.
func Read(name string, r io.Reader) (*File, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%s: larger than %s: not a report of poolrun", name, human.Bytes(MaxSize))
	}
	return Decode(name, data)
}

// readFile reads the file at path whole, as regfile.ReadFile does with
// the limit MaxSize, once its first headSize bytes have passed checkHead.
func readFile(path string) ([]byte, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || fi.Size() > MaxSize {
		f.Close()
		return regfile.ReadFile(path, MaxSize) // refused by its size
	}
	head := make([]byte, headSize)
	n, err := io.ReadFull(f, head)
	f.Close()
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, err // names the path
	}
	if err := checkHead(path, head[:n]); err != nil {
		return nil, err
	}
	return regfile.ReadFile(path, MaxSize)
}

// checkHead refuses the file at path, whose first bytes are head, unless
// they could begin a report: a JSON object, whose tokens head holds
// without a syntax error up to where it ends.
func checkHead(path string, head []byte) error {
	dec := json.NewDecoder(bytes.NewReader(head))
	tok, err := dec.Token()
	if d, ok := tok.(json.Delim); err == nil && (!ok || d != '{') {
		return fmt.Errorf("%s: %w: not a JSON object", path, ErrNotReport)
	}
	for err == nil {
		_, err = dec.Token()
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return nil // the end of head, or of the file: read on
	}
	return fmt.Errorf("%s: %w: %v", path, ErrNotReport, jsonError(head, err))
}

// Decode checks data, the contents of the report file path (which the
// errors name), as [Load] does once it has read them.
func Decode(path string, data []byte) (*File, error) {
	// The fields that tell a pool's report from a bench's: present, not
	// only well typed.
	var probe struct {
		Version *json.RawMessage `json:"version"`
		Command string           `json:"command"`
		Workers *json.RawMessage `json:"workers"`
		Jobs    *json.RawMessage `json:"jobs"`
		Totals  *json.RawMessage `json:"totals"`
		Results *json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrNotReport, jsonError(data, err))
	}
	if probe.Version != nil {
		version := 0
		if err := json.Unmarshal(*probe.Version, &version); err != nil || version < 0 {
			return nil, fmt.Errorf("%s: %w %s: want a whole number from 0 to %d", path, ErrVersion, *probe.Version, Version)
		}
		if version > Version {
			return nil, fmt.Errorf("%s: %w %d: this poolrun reads versions up to %d; a newer poolrun wrote it", path, ErrVersion, version, Version)
		}
	}
	switch {
	case probe.Command == "bench" && probe.Results != nil:
		var b Bench
		if err := json.Unmarshal(data, &b); err != nil {
			return nil, fmt.Errorf("%s: %w: a bench report, but %v", path, ErrNotReport, jsonError(data, err))
		}
		return &File{Bench: &b}, nil
	case probe.Command != "" && probe.Workers != nil && probe.Jobs != nil && probe.Totals != nil:
		var r Pool
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("%s: %w: a pool's report, but %v", path, ErrNotReport, jsonError(data, err))
		}
		for i, j := range r.Jobs {
			if j == nil {
				return nil, fmt.Errorf("%s: %w: job %d of the list is null", path, ErrNotReport, i+1)
			}
		}
		return &File{Pool: &r}, nil
	default:
		return nil, fmt.Errorf("%s: %w: it has no command, workers, jobs and totals (a pool's report) nor command \"bench\" and results (a bench's)", path, ErrNotReport)
	}
}

// jsonError says where in data a JSON error is, by line, where it can.
func jsonError(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	off := int64(-1)
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 || off > int64(len(data)) {
		return err
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	return fmt.Errorf("line %d: %w", line, err)
}
