package regfile

import (
	"errors"
	"io/fs"
	"strconv"
)

// ErrNotRegular is returned, as a [*NotRegularError] that matches it, by
// [Open] and [ReadFile] when the path names something other than a
// regular file: a named pipe (FIFO) or pipe, a directory, a device, a
// socket.
var ErrNotRegular = errors.New("regfile: not a regular file")

// ErrTooLarge is returned, as a [*TooLargeError] that matches it, by
// [ReadFile] when the file holds more bytes than its limit.
var ErrTooLarge = errors.New("regfile: file larger than the limit")

// A NotRegularError reports a path that names something other than a
// regular file. It matches [ErrNotRegular].
type NotRegularError struct {
	Path string      // the path as given
	Mode fs.FileMode // the type bits of what Path names ([fs.FileMode.Type]); never 0
}

// Error returns "PATH: is WHAT, not a regular file", WHAT saying what
// Path names.
func (e *NotRegularError) Error() string {
	var what string
	switch t := e.Mode.Type(); {
	case t&fs.ModeNamedPipe != 0:
		what = "is a named pipe (FIFO)"
	case t&fs.ModeDir != 0:
		what = "is a directory"
	case t&(fs.ModeDevice|fs.ModeCharDevice) != 0:
		what = "is a device"
	case t&fs.ModeSocket != 0:
		what = "is a socket"
	case t&fs.ModeSymlink != 0:
		what = "is a symbolic link"
	default:
		return e.Path + ": is not a regular file"
	}
	return e.Path + ": " + what + ", not a regular file"
}

// Is reports whether target is [ErrNotRegular].
func (e *NotRegularError) Is(target error) bool { return target == ErrNotRegular }

// A TooLargeError reports a file larger than the limit it was read with.
// It matches [ErrTooLarge].
type TooLargeError struct {
	Path string // the path as given
	// Size is the file's size as fstat(2) gave it once open, or, for a
	// file that grew past Limit while it was read, Limit+1: what was read.
	Size  int64
	Limit int64 // the limit given to ReadFile
}

// Error returns "PATH: SIZE bytes, more than the limit of LIMIT", LIMIT
// in MiB where it is a whole number of them ("16 MiB"), in bytes
// otherwise ("5 bytes"): a message for the user who named the file.
func (e *TooLargeError) Error() string {
	const mib = 1 << 20
	limit := strconv.FormatInt(e.Limit, 10) + " bytes"
	if e.Limit >= mib && e.Limit%mib == 0 {
		limit = strconv.FormatInt(e.Limit/mib, 10) + " MiB"
	}
	return e.Path + ": " + strconv.FormatInt(e.Size, 10) + " bytes, more than the limit of " + limit
}

// Is reports whether target is [ErrTooLarge].
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }
