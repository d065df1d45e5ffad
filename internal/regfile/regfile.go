package regfile

import (
	"io"
	"io/fs"
	"math"
	"os"
)

// Open opens the regular file at path for reading, never waiting on what
// path names. It stats path first and refuses anything but a regular file
// without opening it: opening a FIFO, even without waiting, lets in a
// writer that waits for a reader, and opening a device may act on it. It
// then opens path close-on-exec, without waiting (O_NONBLOCK) and without
// making a terminal its controlling one (O_NOCTTY), and checks on the
// descriptor that it is a regular file still: path may have been replaced
// in between. What is not a regular file is refused with a
// [*NotRegularError]; otherwise an error is that of [os.OpenFile] or
// fstat(2), which names the path.
//
// The file stays in non-blocking mode, which reads of a regular file
// ignore.
func Open(path string) (*os.File, error) {
	f, _, err := open(path)
	return f, err
}

// ReadFile reads the whole regular file at path, opened as [Open] opens
// it. A file whose size (fstat(2), once open) is more than limit is
// refused with a [*TooLargeError] before a byte is read; one that grows
// past limit while it is read is refused too, having read limit+1 bytes,
// no more. A read error is that of [os.File.Read], which names the path.
// limit must be below math.MaxInt64, and not negative.
func ReadFile(path string, limit int64) ([]byte, error) {
	if limit < 0 || limit == math.MaxInt64 {
		panic("regfile: ReadFile with a limit out of range")
	}
	f, fi, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := fi.Size()
	if size > limit {
		return nil, &TooLargeError{Path: path, Size: size, Limit: limit}
	}
	// One byte more than the file holds, so that its end is seen without
	// growing the buffer; a file that grew (or, as in /proc, says 0)
	// grows it, up to one byte over the limit. (bytes.Buffer.ReadFrom
	// would grow it anyway, to twice the file, as soon as less than its
	// MinRead is free.)
	buf := make([]byte, 0, size+1)
	r := io.LimitReader(f, limit+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if int64(len(buf)) > limit {
		return nil, &TooLargeError{Path: path, Size: int64(len(buf)), Limit: limit}
	}
	return buf, nil
}

// open is [Open], which also returns what fstat(2) said of the file.
func open(path string) (*os.File, fs.FileInfo, error) {
	// A path that cannot be stat'ed is left to open(2), whose error says
	// why as os.Open's would.
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, nil, &NotRegularError{Path: path, Mode: fi.Mode().Type()}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := regular(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// regular returns what fstat(2) says of the open file f if it is a
// regular file, and a *NotRegularError that names f if not.
func regular(f *os.File) (fs.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &NotRegularError{Path: f.Name(), Mode: fi.Mode().Type()}
	}
	return fi, nil
}
