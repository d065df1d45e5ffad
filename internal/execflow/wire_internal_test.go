package execflow

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// fill sets every field that v reaches (through structs, slices of two
// elements and pointers) to a value of its own that is not zero.
func fill(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d\x00é", *n))
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(*n) * -1000003)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), n)
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(v.Index(i), n)
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	default:
		panic("fill: add a case for " + v.Kind().String() + ", and encode the field in wire.go")
	}
}

// TestArgBinary: a job argument with every field set comes back whole
// from its MarshalBinary, and so do one with every field zero and one
// without outputs; a field added to execArg's types and not to wire.go
// fails it.
func TestArgBinary(t *testing.T) {
	var full execArg
	n := 0
	fill(reflect.ValueOf(&full).Elem(), &n)
	for _, a := range []execArg{full, {}, {ID: "a", Run: strings.Repeat("x", 300), Line: -1}} {
		data, err := a.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var got execArg
		if err := got.UnmarshalBinary(data); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, a) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, a)
		}
	}
}

// TestArgBinaryCut: every prefix of an encoding, and the encoding with a
// byte too many, is refused with an error, never a panic or a value.
func TestArgBinaryCut(t *testing.T) {
	var full execArg
	n := 0
	fill(reflect.ValueOf(&full).Elem(), &n)
	data, _ := full.MarshalBinary()
	for i := range len(data) {
		var a execArg
		if err := a.UnmarshalBinary(data[:i]); err == nil {
			t.Fatalf("%d of %d bytes decoded without an error", i, len(data))
		}
	}
	var a execArg
	if err := a.UnmarshalBinary(append(data, 0)); err == nil {
		t.Fatal("a byte too many decoded without an error")
	}
}

// FuzzArgBinary: whatever the bytes, decoding ends with a value or an
// error; a value decoded encodes to the same bytes.
func FuzzArgBinary(f *testing.F) {
	var full execArg
	n := 0
	fill(reflect.ValueOf(&full).Elem(), &n)
	for _, a := range []execArg{full, {}} {
		data, _ := a.MarshalBinary()
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var a execArg
		if a.UnmarshalBinary(data) != nil {
			return
		}
		again, err := a.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var b execArg
		if err := b.UnmarshalBinary(again); err != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("re-encoded value decodes to %+v, %v; want %+v", b, err, a)
		}
	})
}

// TestPlainWords: which commands run without a shell.
func TestPlainWords(t *testing.T) {
	for run, want := range map[string]string{
		"true":                    "true",
		"  cc -O2 -o a.out a.c  ": "cc|-O2|-o|a.out|a.c",
		"touch out/x.txt":         "touch|out/x.txt",
		"./build.sh --k=v,w@h:1%": "./build.sh|--k=v,w@h:1%",
		"":                        "",
		"   ":                     "",
		"FOO=1 make":              "", // an assignment
		"cd sub":                  "", // built-ins
		"echo hi":                 "",
		"exit 3":                  "",
		"if true":                 "",
		"ls *.c":                  "", // glob
		"ls ~":                    "",
		"echo a > b":              "",
		"a | b":                   "",
		"a; b":                    "",
		"a && b":                  "",
		"sleep 1 &":               "",
		"echo $HOME":              "",
		"echo 'a b'":              "",
		`echo "a"`:                "",
		`a\ b`:                    "",
		"a # comment":             "",
		"a\nb":                    "",
		"(a)":                     "",
		"{a,b}":                   "",
		"[ -f x ]":                "",
		"!a":                      "",
	} {
		if got := strings.Join(plainWords(run), "|"); got != want {
			t.Errorf("plainWords(%q) = %q, want %q", run, got, want)
		}
	}
}

// TestResultBinary: a Result with every field set, and the zero Result,
// come back whole; a cut encoding is refused.
func TestResultBinary(t *testing.T) {
	var full Result
	n := 0
	fill(reflect.ValueOf(&full).Elem(), &n)
	for _, r := range []Result{full, {}} {
		data, err := r.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var got Result
		if err := got.UnmarshalBinary(data); err != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("round trip: %+v, %v; want %+v", got, err, r)
		}
		for i := range len(data) {
			if got.UnmarshalBinary(data[:i]) == nil {
				t.Errorf("%d of %d bytes decoded without an error", i, len(data))
			}
		}
	}
}
