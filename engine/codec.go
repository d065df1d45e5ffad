package engine

import (
	"bytes"
	"encoding/gob"
	"reflect"
)

// The value codec: arguments and results cross between processes as
// encoding/gob values of the registered function's types.

// encodeValue encodes v with encoding/gob. Values of a type that takes no
// room (struct{}) encode as nothing: gob refuses types without exported
// fields, and there is nothing to send.
func encodeValue[T any](v T) ([]byte, error) {
	if reflect.TypeFor[T]().Size() == 0 {
		return nil, nil
	}
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func decodeValue[T any](data []byte, v *T) error {
	if reflect.TypeFor[T]().Size() == 0 {
		return nil
	}
	return gob.NewDecoder(bytes.NewReader(data)).Decode(v)
}
