package engine

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"reflect"
)

// The value codec: arguments and results cross between processes as
// encoding/gob values of the registered function's types.

// encodeValue encodes v with encoding/gob; an encoding of more than limit
// bytes is refused with an error wrapping [ErrTooLarge]. Values of a type
// that takes no room (struct{}) encode as nothing: gob refuses types without
// exported fields, and there is nothing to send.
func encodeValue[T any](v T, limit int) ([]byte, error) {
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
	if reflect.TypeFor[T]().Size() == 0 {
		return nil
	}
	return gob.NewDecoder(bytes.NewReader(data)).Decode(v)
}
