package engine

import (
	"bytes"
	"encoding/gob"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

type (
	plainCount int16
	plainName  string
	plainBlob  []byte
	// gobCelsius has gob methods of its own: gob must keep crossing it.
	gobCelsius float64
)

func (c gobCelsius) GobEncode() ([]byte, error) { return []byte{byte(c)}, nil }
func (c *gobCelsius) GobDecode(b []byte) error {
	*c = gobCelsius(b[0]) + 0.5 // marks that the method ran
	return nil
}

// roundTrip encodes v and decodes it into a fresh T.
func roundTrip[T any](t *testing.T, v T) (T, []byte) {
	t.Helper()
	data, err := encodeValue(v, DefaultMaxValueSize)
	if err != nil {
		t.Fatalf("encode %T %v: %v", v, v, err)
	}
	var got T
	if err := decodeValue(data, &got); err != nil {
		t.Fatalf("decode %T %v: %v", v, v, err)
	}
	return got, data
}

// gobRoundTrip is what gob alone makes of v: plain values must decode to
// the same, so that the codec changes nothing but the bytes.
func gobRoundTrip[T any](t *testing.T, v T) T {
	t.Helper()
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(v); err != nil {
		t.Fatal(err)
	}
	var got T
	if err := gob.NewDecoder(&b).Decode(&got); err != nil {
		t.Fatal(err)
	}
	return got
}

// checkPlain: v crosses as a plain value, decodes equal to what gob would
// make of it, in at most size bytes.
func checkPlain[T any](t *testing.T, v T, size int) {
	t.Helper()
	if k := codecOf[T](); k != codecPlain {
		t.Errorf("%T crosses as codec %d, want plain", v, k)
	}
	got, data := roundTrip(t, v)
	if want := gobRoundTrip(t, v); !reflect.DeepEqual(got, want) {
		t.Errorf("%T %v: decoded %#v, gob decodes %#v", v, v, got, want)
	}
	if len(data) > size {
		t.Errorf("%T %v: %d bytes, want at most %d", v, v, len(data), size)
	}
}

// TestPlainValues: bools, numbers, strings and []byte, named or not, cross
// as their value alone and decode as gob decodes them.
func TestPlainValues(t *testing.T) {
	checkPlain(t, true, 1)
	checkPlain(t, false, 1)
	for _, v := range []int{0, 1, -1, 63, -64, 1 << 40, math.MaxInt, math.MinInt} {
		checkPlain(t, v, 10)
	}
	checkPlain(t, int8(-128), 2)
	checkPlain(t, plainCount(-300), 3)
	checkPlain(t, uint64(math.MaxUint64), 10)
	checkPlain(t, uint8(255), 2)
	checkPlain(t, uintptr(7), 1)
	checkPlain(t, float32(-1.5), 4)
	checkPlain(t, math.Inf(-1), 8)
	checkPlain(t, math.SmallestNonzeroFloat64, 8)
	checkPlain(t, "", 0)
	checkPlain(t, "naïve ☃", len("naïve ☃"))
	checkPlain(t, plainName("granule"), 7)
	checkPlain(t, []byte(nil), 0)
	checkPlain(t, []byte{}, 0) // nil once decoded, as with gob
	checkPlain(t, []byte{0, 1, 2, 255}, 4)
	checkPlain(t, plainBlob("abc"), 3)
	if got, _ := roundTrip(t, math.NaN()); !math.IsNaN(got) {
		t.Errorf("NaN decoded as %v", got)
	}
}

// TestNotPlain: types with gob methods, interfaces, structs, other slices
// and maps keep crossing with gob; types of size zero as nothing.
func TestNotPlain(t *testing.T) {
	if k := codecOf[gobCelsius](); k != codecGob {
		t.Errorf("a float64 with GobEncode: codec %d, want gob", k)
	}
	if got, _ := roundTrip(t, gobCelsius(20)); got != 20.5 {
		t.Errorf("gobCelsius(20) crossed as %v, want 20.5 (its GobDecode)", got)
	}
	if k := codecOf[any](); k != codecGob {
		t.Errorf("any: codec %d, want gob", k)
	}
	if k := codecOf[[]int](); k != codecGob {
		t.Errorf("[]int: codec %d, want gob", k)
	}
	if k := codecOf[map[string]int](); k != codecGob {
		t.Errorf("map: codec %d, want gob", k)
	}
	if k := codecOf[struct{ X int }](); k != codecGob {
		t.Errorf("struct: codec %d, want gob", k)
	}
	if k := codecOf[struct{}](); k != codecEmpty {
		t.Errorf("struct{}: codec %d, want empty", k)
	}
}

// TestPlainBadBytes: bytes that are no value of the type are refused, and
// the error names the type.
func TestPlainBadBytes(t *testing.T) {
	var b bool
	var i8 int8
	var u uint
	var f float64
	for _, tc := range []struct {
		name string
		err  error
		typ  string
	}{
		{"bool of 2 bytes", decodeValue([]byte{1, 0}, &b), "bool"},
		{"bool of 2", decodeValue([]byte{2}, &b), "bool"},
		{"int8 overflow", decodeValue(appendPlain(nil, reflect.ValueOf(int64(300))), &i8), "int8"},
		{"int with a byte after it", decodeValue([]byte{2, 0}, &i8), "int8"},
		{"empty uint", decodeValue(nil, &u), "uint"},
		{"float64 of 4 bytes", decodeValue([]byte{0, 0, 0, 0}, &f), "float64"},
	} {
		if !errors.Is(tc.err, errPlainValue) || !strings.Contains(tc.err.Error(), tc.typ) {
			t.Errorf("%s: %v, want errPlainValue naming %s", tc.name, tc.err, tc.typ)
		}
	}
}

// TestPlainLimit: a plain value over the limit is refused with ErrTooLarge.
func TestPlainLimit(t *testing.T) {
	if _, err := encodeValue(strings.Repeat("x", 65), 64); !errors.Is(err, ErrTooLarge) {
		t.Errorf("65 bytes over a 64-byte limit: %v, want ErrTooLarge", err)
	}
	if _, err := encodeValue(strings.Repeat("x", 64), 64); err != nil {
		t.Errorf("64 bytes at a 64-byte limit: %v", err)
	}
}

// TestPlainAllocs: an int is encoded with one allocation (its bytes), and
// decoded with none.
func TestPlainAllocs(t *testing.T) {
	data, _ := encodeValue(12345, DefaultMaxValueSize)
	var v int
	if n := testing.AllocsPerRun(100, func() { encodeValue(12345, DefaultMaxValueSize) }); n > 1 {
		t.Errorf("encoding an int: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { decodeValue(data, &v) }); n > 0 {
		t.Errorf("decoding an int: %v allocations", n)
	}
}
