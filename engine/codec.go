package engine

import (
	"bytes"
	"encoding"
	"encoding/gob"
	"fmt"
	"reflect"
	"sync"
)

// The value codec: arguments and results cross between processes as
// encoding/gob values of the registered function's types; a type that
// implements encoding.BinaryMarshaler and whose pointer implements
// encoding.BinaryUnmarshaler crosses as the bytes of its own methods
// instead. Gob sends a description of the type with every value and
// compiles a decoder for it on every decode, which a short job pays in
// full each time (bench/README.md, Codec).

// binaryCodec reports whether values of T cross as the bytes of their
// own MarshalBinary and UnmarshalBinary.
func binaryCodec[T any]() bool {
	t := reflect.TypeFor[T]()
	if b, ok := binaryCodecs.Load(t); ok {
		return b.(bool)
	}
	m := reflect.TypeFor[encoding.BinaryMarshaler]()
	u := reflect.TypeFor[encoding.BinaryUnmarshaler]()
	b := t.Kind() != reflect.Interface &&
		(t.Implements(m) || reflect.PointerTo(t).Implements(m)) && reflect.PointerTo(t).Implements(u)
	binaryCodecs.Store(t, b)
	return b
}

// binaryCodecs holds binaryCodec's answers, by type.
var binaryCodecs sync.Map

// encodeValue encodes v with encoding/gob; an encoding of more than limit
// bytes is refused with an error wrapping [ErrTooLarge]. Values of a type
// that takes no room (struct{}) encode as nothing: gob refuses types without
// exported fields, and there is nothing to send.
func encodeValue[T any](v T, limit int) ([]byte, error) {
	if binaryCodec[T]() {
		m, ok := any(v).(encoding.BinaryMarshaler)
		if !ok {
			m = any(&v).(encoding.BinaryMarshaler)
		}
		data, err := m.MarshalBinary()
		if err != nil {
			return nil, err
		}
		if len(data) > limit {
			return nil, fmt.Errorf("%w: %d bytes encoded, the limit is %d (engine.MaxValueSize)", ErrTooLarge, len(data), limit)
		}
		return data, nil
	}
	if reflect.TypeFor[T]().Size() == 0 {
		return nil, nil
	}
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(v); err != nil {
		return nil, err
	}
	if b.Len() > limit {
		return nil, fmt.Errorf("%w: %d bytes encoded, the limit is %d (engine.MaxValueSize)", ErrTooLarge, b.Len(), limit)
	}
	if b.Cap()-b.Len() > 16 {
		// A queued job keeps its argument until it has run: no room to
		// spare (a small value's buffer has 64 bytes).
		return bytes.Clone(b.Bytes()), nil
	}
	return b.Bytes(), nil
}

func decodeValue[T any](data []byte, v *T) error {
	if binaryCodec[T]() {
		return any(v).(encoding.BinaryUnmarshaler).UnmarshalBinary(data)
	}
	if reflect.TypeFor[T]().Size() == 0 {
		return nil
	}
	return gob.NewDecoder(bytes.NewReader(data)).Decode(v)
}
