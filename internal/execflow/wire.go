package execflow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// A job's argument crosses to its worker as the bytes of its own
// MarshalBinary, which the engine uses instead of gob (engine.Func): gob
// would describe execArg's type with every job and compile a decoder for it
// in the worker each time, a tenth of a worker's time on jobs of `true`.
// The encoding is a version byte, then each field in order: strings and
// lists as a length (uvarint) and their elements, ints as varints, bools
// as a byte. TestArgBinary fills every field, so a field added to the
// types and not here fails it. A job's Result crosses back the same way.

// argVersion is the first byte of an encoded execArg.
const argVersion = 5

// MarshalBinary implements encoding.BinaryMarshaler.
func (a execArg) MarshalBinary() ([]byte, error) {
	var e encoder
	e.b = make([]byte, 0, 256+len(a.Run))
	e.b = append(e.b, argVersion)
	e.str(a.ID)
	e.str(a.Run)
	e.str(a.File)
	e.int(a.Line)
	e.str(a.Dir)
	e.strs(a.Env)
	e.int(a.TailLines)
	e.int(len(a.Items))
	for _, ip := range a.Items {
		e.str(ip.Name)
		e.str(ip.Run)
		e.str(ip.Worker)
		e.str(ip.File)
		e.int(ip.Line)
		e.str(ip.Dir)
		e.str(ip.Env)
		e.str(ip.Scratch)
		e.int(ip.TailLines)
	}
	e.bool(a.Stdio.Tag)
	e.str(a.Stdio.LogDir)
	e.bool(a.Stdio.Echo)
	e.bool(a.Outputs != nil)
	if o := a.Outputs; o != nil {
		e.str(o.Dir.Abs)
		e.str(o.Dir.Shown)
		e.str(o.Root)
		e.strs(o.List)
		e.strs(o.Made)
		e.strs(o.Keep)
		e.strs(o.Protect)
	}
	e.strs(a.Globs)
	e.int(a.Threads)
	e.strs(a.ResEnv)
	e.bool(a.Program != nil)
	if p := a.Program; p != nil {
		e.str(p.Name)
		e.str(p.Run)
		e.str(p.Env)
		e.str(p.Keys)
		e.str(p.File)
		e.int(p.Line)
		e.str(p.Dir)
		e.str(p.OptEnv)
		e.int(p.TailLines)
		e.bool(p.Stdio.Tag)
		e.str(p.Stdio.LogDir)
		e.bool(p.Stdio.Echo)
	}
	e.strs(a.Args)
	e.strs(a.Held)
	return e.b, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (a *execArg) UnmarshalBinary(data []byte) error {
	if len(data) == 0 || data[0] != argVersion {
		return errors.New("execflow: job argument of another version")
	}
	d := decoder{b: data[1:]}
	*a = execArg{}
	a.ID = d.str()
	a.Run = d.str()
	a.File = d.str()
	a.Line = d.int()
	a.Dir = d.str()
	a.Env = d.strs()
	a.TailLines = d.int()
	if n := d.len(); n > 0 {
		a.Items = make([]itemParam, n)
		for i := range a.Items {
			ip := &a.Items[i]
			ip.Name = d.str()
			ip.Run = d.str()
			ip.Worker = d.str()
			ip.File = d.str()
			ip.Line = d.int()
			ip.Dir = d.str()
			ip.Env = d.str()
			ip.Scratch = d.str()
			ip.TailLines = d.int()
		}
	}
	a.Stdio.Tag = d.bool()
	a.Stdio.LogDir = d.str()
	a.Stdio.Echo = d.bool()
	if d.bool() {
		o := &outputs{}
		o.Dir.Abs = d.str()
		o.Dir.Shown = d.str()
		o.Root = d.str()
		o.List = d.strs()
		o.Made = d.strs()
		o.Keep = d.strs()
		o.Protect = d.strs()
		a.Outputs = o
	}
	a.Globs = d.strs()
	a.Threads = d.int()
	a.ResEnv = d.strs()
	if d.bool() {
		p := &programParam{}
		p.Name = d.str()
		p.Run = d.str()
		p.Env = d.str()
		p.Keys = d.str()
		p.File = d.str()
		p.Line = d.int()
		p.Dir = d.str()
		p.OptEnv = d.str()
		p.TailLines = d.int()
		p.Stdio.Tag = d.bool()
		p.Stdio.LogDir = d.str()
		p.Stdio.Echo = d.bool()
		a.Program = p
	}
	a.Args = d.strs()
	a.Held = d.strs()
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes too many", len(d.b))
	}
	if d.err != nil {
		return fmt.Errorf("execflow: decoding a job's argument: %w", d.err)
	}
	return nil
}

type encoder struct{ b []byte }

func (e *encoder) int(i int) { e.b = binary.AppendVarint(e.b, int64(i)) }

func (e *encoder) str(s string) {
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *encoder) strs(l []string) {
	e.int(len(l))
	for _, s := range l {
		e.str(s)
	}
}

func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

// decoder reads what an encoder wrote; its first error sticks, and every
// read after it gives a zero value.
type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("cut short")

func (d *decoder) int() int {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return int(v)
}

// len reads a length, which is at most the bytes left.
func (d *decoder) len() int {
	n := d.int()
	if n < 0 || n > len(d.b) {
		if d.err == nil {
			d.err = fmt.Errorf("a length of %d with %d bytes left", n, len(d.b))
		}
		return 0
	}
	return n
}

func (d *decoder) str() string {
	if d.err != nil {
		return ""
	}
	n, k := binary.Uvarint(d.b)
	if k <= 0 || n > uint64(len(d.b)-k) {
		d.err = errShort
		return ""
	}
	s := string(d.b[k : k+int(n)])
	d.b = d.b[k+int(n):]
	return s
}

func (d *decoder) strs() []string {
	n := d.len()
	if n == 0 {
		return nil
	}
	l := make([]string, n)
	for i := range l {
		l[i] = d.str()
	}
	return l
}

func (d *decoder) bool() bool {
	if d.err != nil {
		return false
	}
	if len(d.b) == 0 {
		d.err = errShort
		return false
	}
	if d.b[0] > 1 {
		d.err = fmt.Errorf("a bool of %d", d.b[0])
		return false
	}
	v := d.b[0] == 1
	d.b = d.b[1:]
	return v
}

// resultVersion is the first byte of an encoded Result.
const resultVersion = 4

// MarshalBinary implements encoding.BinaryMarshaler, so that a job's
// result crosses from its worker without gob (see execArg's).
func (r Result) MarshalBinary() ([]byte, error) {
	e := encoder{b: make([]byte, 0, 16+len(r.Stderr))}
	e.b = append(e.b, resultVersion)
	e.int(r.ExitCode)
	e.str(r.Stderr)
	e.int(int(r.Duration))
	e.int(int(r.PeakRSS))
	e.strs(r.Outputs)
	e.int(r.Inputs.Count)
	e.str(r.Inputs.Hash)
	e.strs(r.Inputs.Files)
	return e.b, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (r *Result) UnmarshalBinary(data []byte) error {
	if len(data) == 0 || data[0] != resultVersion {
		return errors.New("execflow: job result of another version")
	}
	d := decoder{b: data[1:]}
	*r = Result{ExitCode: d.int(), Stderr: d.str(), Duration: time.Duration(d.int()), PeakRSS: int64(d.int()), Outputs: d.strs()}
	r.Inputs = MatchedInputs{Count: d.int(), Hash: d.str(), Files: d.strs()}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes too many", len(d.b))
	}
	if d.err != nil {
		return fmt.Errorf("execflow: decoding a job's result: %w", d.err)
	}
	return nil
}
