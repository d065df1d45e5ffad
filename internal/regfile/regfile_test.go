package regfile_test

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/regfile"
)

// refuseWithin bounds how long a refusal may take: a regression that
// waits in open(2) for a FIFO's writer fails the test instead of hanging.
const refuseWithin = 10 * time.Second

// within returns what f returns, failing the test if f has not returned
// within refuseWithin (f is then left waiting); what names the call.
func within[T any](t *testing.T, what string, f func() (T, error)) (T, error) {
	t.Helper()
	type res struct {
		v   T
		err error
	}
	done := make(chan res, 1)
	go func() {
		v, err := f()
		done <- res{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-time.After(refuseWithin):
		t.Fatalf("%s did not return within %v", what, refuseWithin)
		panic("unreachable")
	}
}

// readFile is regfile.ReadFile, within refuseWithin.
func readFile(t *testing.T, path string, limit int64) ([]byte, error) {
	t.Helper()
	return within(t, "ReadFile("+path+")", func() ([]byte, error) { return regfile.ReadFile(path, limit) })
}

func mkfifo(t *testing.T, path string) string {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
	return path
}

// TestReadFile: a regular file (or a link to one) of at most the limit is
// read whole; anything else is refused at once with an error that names
// the path and says what is wrong.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	hello := write("hello.txt", "hello\n")
	empty := write("empty.txt", "")
	fifo := mkfifo(t, filepath.Join(dir, "wf.fifo"))
	link := filepath.Join(dir, "link.txt")
	fifoLink := filepath.Join(dir, "fifo-link")
	for target, name := range map[string]string{hello: link, fifo: fifoLink} {
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// What <(command) gives a program: a pipe, as /dev/fd/N.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	pipe := "/dev/fd/" + strconv.Itoa(int(pr.Fd()))

	for _, tt := range []struct {
		name  string
		path  string
		limit int64
		want  string // the content; "" with an error
		err   error  // matched by the error
		says  string // after "PATH: " in the error
	}{
		{name: "regular file", path: hello, limit: 100, want: "hello\n"},
		{name: "at the limit", path: hello, limit: 6, want: "hello\n"},
		{name: "empty, limit 0", path: empty, limit: 0},
		{name: "a link to a regular file", path: link, limit: 100, want: "hello\n"},
		{name: "over the limit", path: hello, limit: 5, err: regfile.ErrTooLarge, says: "6 bytes, more than the limit of 5 bytes"},
		{name: "missing", path: filepath.Join(dir, "none"), limit: 100, err: fs.ErrNotExist},
		{name: "directory", path: dir, limit: 100, err: regfile.ErrNotRegular, says: "is a directory, not a regular file"},
		{name: "FIFO", path: fifo, limit: 100, err: regfile.ErrNotRegular, says: "is a named pipe (FIFO), not a regular file"},
		{name: "a link to a FIFO", path: fifoLink, limit: 100, err: regfile.ErrNotRegular, says: "is a named pipe (FIFO), not a regular file"},
		{name: "a pipe", path: pipe, limit: 100, err: regfile.ErrNotRegular, says: "is a named pipe (FIFO), not a regular file"},
		{name: "socket", path: sock, limit: 100, err: regfile.ErrNotRegular, says: "is a socket, not a regular file"},
		{name: "/dev/null", path: os.DevNull, limit: 100, err: regfile.ErrNotRegular, says: "is a device, not a regular file"},
		{name: "/dev/zero", path: "/dev/zero", limit: 100, err: regfile.ErrNotRegular, says: "is a device, not a regular file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data, err := readFile(t, tt.path, tt.limit)
			if tt.err == nil {
				if err != nil || string(data) != tt.want {
					t.Fatalf("ReadFile(%s) = %q, %v; want %q", tt.path, data, err, tt.want)
				}
				return
			}
			if !errors.Is(err, tt.err) || data != nil {
				t.Fatalf("ReadFile(%s) = %q, %v; want an error matching %v", tt.path, data, err, tt.err)
			}
			if !strings.Contains(err.Error(), tt.path+": "+tt.says) {
				t.Errorf("error %q; want it to say %q", err, tt.path+": "+tt.says)
			}
			// The typed error goes with its sentinel.
			var nr *regfile.NotRegularError
			if isNR, want := errors.As(err, &nr), tt.err == regfile.ErrNotRegular; isNR != want {
				t.Errorf("error %q: errors.As a *NotRegularError %v, want %v", err, isNR, want)
			}
		})
	}
}

// TestReadFileSizeFirst: a file over the limit is refused from its size,
// before it is read: nothing near its size is allocated.
func TestReadFileSizeFirst(t *testing.T) {
	const limit = 64 << 20
	path := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, limit+1); err != nil { // sparse on disk
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := regfile.ReadFile(path, limit)
	runtime.ReadMemStats(&after)
	var big *regfile.TooLargeError
	if !errors.As(err, &big) || big.Size != limit+1 || big.Limit != limit || big.Path != path {
		t.Fatalf("ReadFile = %v; want a *TooLargeError of %s, size %d, limit %d", err, path, limit+1, limit)
	}
	if want := path + ": 67108865 bytes, more than the limit of 64 MiB"; err.Error() != want {
		t.Errorf("error %q; want %q (a limit of whole MiB in MiB)", err, want)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("ReadFile allocated %d bytes to refuse a file of %d: it read the file", got, limit+1)
	}
}

// TestReadFileAllocatesItsSize: a file within the limit is read into one
// buffer of its size, not grown to twice that on its last read.
func TestReadFileAllocatesItsSize(t *testing.T) {
	const size = 8 << 20
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	data, err := regfile.ReadFile(path, 1<<30)
	runtime.ReadMemStats(&after)
	if err != nil || len(data) != size || data[0] != 'x' {
		t.Fatalf("ReadFile = %d bytes, %v; want %d bytes", len(data), err, size)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > size+size/4 {
		t.Errorf("ReadFile allocated %d bytes to read a file of %d", got, size)
	}
}

// TestReadFileGrown: a file that holds more than its size says, as the
// files of /proc do (size 0), is read up to the limit and one byte more,
// then refused.
func TestReadFileGrown(t *testing.T) {
	const path = "/proc/self/status"
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Skip("no /proc/self/status of size 0 here")
	}
	data, err := regfile.ReadFile(path, 1<<20)
	if err != nil || !strings.Contains(string(data), "Name:") {
		t.Fatalf("ReadFile(%s) = %q, %v; want its content", path, data, err)
	}
	_, err = regfile.ReadFile(path, 10)
	var big *regfile.TooLargeError
	if !errors.As(err, &big) || big.Size != 11 || big.Limit != 10 {
		t.Fatalf("ReadFile(%s, 10) = %v; want a *TooLargeError of size 11 (what was read), limit 10", path, err)
	}
}

// TestReadFileLeavesFIFOAlone: ReadFile never opens a FIFO, not even for
// a moment without waiting. A writer waiting for a reader would get in
// and then write into a FIFO that nobody reads. A writer here tries to
// open the FIFO, without waiting, for as long as ReadFile is called again
// and again: it must never find a reader.
func TestReadFileLeavesFIFOAlone(t *testing.T) {
	fifo := mkfifo(t, filepath.Join(t.TempDir(), "wf.fifo"))
	stop := make(chan struct{})
	opened := make(chan int, 1)
	go func() {
		for tries := 1; ; tries++ {
			select {
			case <-stop:
				opened <- 0
				return
			default:
			}
			fd, err := syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK, 0)
			if err == nil {
				syscall.Close(fd)
				opened <- tries
				return
			}
			if !errors.Is(err, syscall.ENXIO) {
				t.Errorf("opening the FIFO to write: %v", err)
			}
		}
	}()
	for range 2000 {
		if _, err := regfile.ReadFile(fifo, 100); !errors.Is(err, regfile.ErrNotRegular) {
			t.Fatalf("ReadFile of a FIFO: %v", err)
		}
	}
	close(stop)
	if n := <-opened; n > 0 {
		t.Fatalf("a writer found the FIFO open for reading (at its try %d): ReadFile opened it", n)
	}
}

// TestOpen: Open gives a regular file open for reading, and refuses what
// ReadFile refuses, without a limit.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := regfile.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	n, err := f.Read(buf)
	f.Close()
	if err != nil || string(buf[:n]) != "data" {
		t.Errorf("read %q, %v from the file Open gave; want \"data\"", buf[:n], err)
	}
	fifo := mkfifo(t, filepath.Join(dir, "wf.fifo"))
	for _, p := range []string{dir, fifo, os.DevNull} {
		f, err := within(t, "Open("+p+")", func() (*os.File, error) { return regfile.Open(p) })
		if !errors.Is(err, regfile.ErrNotRegular) || f != nil {
			t.Errorf("Open(%s) = %v, %v; want nil and an error matching ErrNotRegular", p, f, err)
			if f != nil {
				f.Close()
			}
		}
	}
	if _, err := regfile.Open(filepath.Join(dir, "none")); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "none") {
		t.Errorf("Open of a missing file: %v; want an error naming it that matches fs.ErrNotExist", err)
	}
}

// TestReadFileNegativeLimit: a negative limit is a mistake of the caller.
func TestReadFileNegativeLimit(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(r.(string), "regfile: ") {
			t.Errorf("recovered %v; want a panic of package regfile", r)
		}
	}()
	regfile.ReadFile(os.DevNull, -1)
}
