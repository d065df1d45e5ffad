package engine

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
)

// The value codec: arguments and results cross between processes as
// encoding/gob values of the registered function's types, with three
// exceptions that cost less per job:
//
//   - a type that implements encoding.BinaryMarshaler and whose pointer
//     implements encoding.BinaryUnmarshaler crosses as the bytes of its own
//     methods;
//   - a type of size zero (struct{}) crosses as nothing;
//   - a type whose kind is a bool, a number or a string, or a slice of
//     bytes, and that has no gob or binary methods of its own, crosses as
//     its value alone (a varint, the bits of a float, the bytes).
//
// Gob sends a description of the type with every value and compiles a
// decoder for it on every decode, which a short job pays in full each time
// (bench/README.md, Codec). Both sides of a pool are one build, so the
// choice is made by the type alone.

// codecKind is how values of a type cross.
type codecKind int

const (
	codecGob    codecKind = iota
	codecBinary           // its own MarshalBinary and UnmarshalBinary
	codecEmpty            // nothing: a type of size zero
	codecPlain            // the value alone: see plainKind
)

// plainKind reports whether values of kind k cross alone (see codecPlain);
// a []byte is a slice and is checked apart.
func plainKind(k reflect.Kind) bool {
	switch k {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// codecOf reports how values of T cross.
func codecOf[T any]() codecKind {
	t := reflect.TypeFor[T]()
	if k, ok := codecKinds.Load(t); ok {
		return k.(codecKind)
	}
	k := codecGob
	implements := func(i reflect.Type) bool { return t.Implements(i) || reflect.PointerTo(t).Implements(i) }
	binM, binU := reflect.TypeFor[encoding.BinaryMarshaler](), reflect.TypeFor[encoding.BinaryUnmarshaler]()
	gobE, gobD := reflect.TypeFor[gob.GobEncoder](), reflect.TypeFor[gob.GobDecoder]()
	switch {
	case t.Kind() == reflect.Interface:
	case implements(binM) && reflect.PointerTo(t).Implements(binU):
		k = codecBinary
	case t.Size() == 0:
		k = codecEmpty
	case implements(gobE) || implements(gobD) || implements(binM) || implements(binU):
		// Gob honours these methods: leave the value to it.
	case plainKind(t.Kind()) || t.Kind() == reflect.Slice && t.Elem() == reflect.TypeFor[byte]():
		k = codecPlain
	}
	codecKinds.Store(t, k)
	return k
}

// codecKinds holds codecOf's answers, by type.
var codecKinds sync.Map

// errPlainValue is returned when the bytes of a plain value do not decode.
var errPlainValue = errors.New("not the encoding of a value of its type")

// encodeValue encodes v as codecOf[T] says; an encoding of more than limit
// bytes is refused with an error wrapping [ErrTooLarge].
func encodeValue[T any](v T, limit int) ([]byte, error) {
	return encodeAs(codecOf[T](), v, limit)
}

// encodeAs is encodeValue for a type whose codecOf is k. The binary and
// gob cases are functions of their own: they hand v to an interface,
// which would make every value, plain ones too, escape to the heap.
func encodeAs[T any](k codecKind, v T, limit int) ([]byte, error) {
	var data []byte
	var err error
	switch k {
	case codecEmpty:
		return nil, nil
	case codecBinary:
		data, err = encodeBinary(v)
	case codecPlain:
		data = appendPlain(nil, reflect.ValueOf(&v).Elem())
	default:
		data, err = encodeGob(v, limit)
	}
	if err != nil {
		return nil, err
	}
	if len(data) > limit {
		return nil, fmt.Errorf("%w: %d bytes encoded, the limit is %d (engine.MaxValueSize)", ErrTooLarge, len(data), limit)
	}
	return data, nil
}

// encodeBinary encodes v, of a codecBinary type, with its MarshalBinary.
func encodeBinary[T any](v T) ([]byte, error) {
	m, ok := any(v).(encoding.BinaryMarshaler)
	if !ok {
		m = any(&v).(encoding.BinaryMarshaler)
	}
	return m.MarshalBinary()
}

// encodeGob encodes v with gob.
func encodeGob[T any](v T, limit int) ([]byte, error) {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(v); err != nil {
		return nil, err
	}
	data := b.Bytes()
	if b.Cap()-b.Len() > 16 && b.Len() <= limit {
		// A queued job keeps its argument until it has run: no room
		// to spare (a small value's buffer has 64 bytes).
		data = bytes.Clone(data)
	}
	return data, nil
}

func decodeValue[T any](data []byte, v *T) error {
	return decodeAs(codecOf[T](), data, v)
}

// decodeAs is decodeValue for a type whose codecOf is k. As in encodeAs,
// the binary and gob cases are functions of their own, so that v does not
// escape in the others.
func decodeAs[T any](k codecKind, data []byte, v *T) error {
	switch k {
	case codecEmpty:
		return nil
	case codecBinary:
		return decodeBinary(data, v)
	case codecPlain:
		if err := setPlain(reflect.ValueOf(v).Elem(), data); err != nil {
			return fmt.Errorf("%w: %d bytes for a %v", err, len(data), reflect.TypeFor[T]())
		}
		return nil
	}
	return decodeGob(data, v)
}

// decodeBinary decodes data into v, of a codecBinary type, with its
// UnmarshalBinary. It decodes into a copy, so that the interface holds
// the copy and v does not escape.
func decodeBinary[T any](data []byte, v *T) error {
	x := *v
	err := any(&x).(encoding.BinaryUnmarshaler).UnmarshalBinary(data)
	*v = x
	return err
}

// decodeGob decodes data into v with gob, through a copy as decodeBinary
// does.
func decodeGob[T any](data []byte, v *T) error {
	x := *v
	err := gob.NewDecoder(bytes.NewReader(data)).Decode(&x)
	*v = x
	return err
}

// appendPlain appends the encoding of v, of a plain kind: a bool as a
// byte, a signed integer as a varint, an unsigned one as a uvarint, a
// float as its bits (8 bytes, 4 for a float32), a string or a []byte as
// its bytes.
func appendPlain(b []byte, v reflect.Value) []byte {
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			return append(b, 1)
		}
		return append(b, 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return binary.AppendVarint(b, v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return binary.AppendUvarint(b, v.Uint())
	case reflect.Float32:
		return binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(v.Float())))
	case reflect.Float64:
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(v.Float()))
	case reflect.String:
		return append(b, v.String()...)
	default: // []byte
		return append(b, v.Bytes()...)
	}
}

// setPlain sets v, of a plain kind, from data as appendPlain wrote it. An
// empty []byte decodes as nil, as gob decodes it.
func setPlain(v reflect.Value, data []byte) error {
	switch v.Kind() {
	case reflect.Bool:
		if len(data) != 1 || data[0] > 1 {
			return errPlainValue
		}
		v.SetBool(data[0] == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x, n := binary.Varint(data)
		if n <= 0 || n != len(data) || v.OverflowInt(x) {
			return errPlainValue
		}
		v.SetInt(x)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		x, n := binary.Uvarint(data)
		if n <= 0 || n != len(data) || v.OverflowUint(x) {
			return errPlainValue
		}
		v.SetUint(x)
	case reflect.Float32:
		if len(data) != 4 {
			return errPlainValue
		}
		v.SetFloat(float64(math.Float32frombits(binary.LittleEndian.Uint32(data))))
	case reflect.Float64:
		if len(data) != 8 {
			return errPlainValue
		}
		v.SetFloat(math.Float64frombits(binary.LittleEndian.Uint64(data)))
	case reflect.String:
		v.SetString(string(data))
	default: // []byte
		if len(data) == 0 {
			v.SetBytes(nil)
		} else {
			v.SetBytes(bytes.Clone(data))
		}
	}
	return nil
}
