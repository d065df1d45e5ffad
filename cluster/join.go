package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/poolrun/poolrun/internal/atomicfile"
	"github.com/poolrun/poolrun/internal/regfile"
)

// Join is what a worker needs to join a pool: the content of a join file.
type Join struct {
	// URL is the pool's NATS server, nats://host:port.
	URL string `json:"url"`
	// Token is the pool's credential: a client without it is refused.
	Token string `json:"token"`
	// Protocol is the engine's protocol version of the pool's build.
	Protocol int `json:"protocol"`
	// Build fingerprints the pool's build (its registered functions and
	// protocol version): a worker of another build is refused.
	Build string `json:"build,omitempty"`
	// CA is, for a pool reached over TLS, what a worker trusts, and
	// nothing else: the PEM certificate of the pool's own authority, which
	// signed its server's certificate, or the certificates of the file
	// given with TLSFiles.
	CA string `json:"ca,omitempty"`
	// Outputs are the folders where the pool's jobs write (absolute
	// paths): a worker must be able to write in each, at the same path
	// ([Join.CheckOutputs]).
	Outputs []string `json:"outputs,omitempty"`
}

// CheckOutputs checks that this process can write in each of j's output
// folders: it creates a file of its own there (a private, uniquely named
// probe) and removes it. The error names the folder and this host: a
// worker that cannot write there must not join, its jobs would fail.
func (j Join) CheckOutputs() error {
	for _, d := range j.Outputs {
		if err := probeFolder(d); err != nil {
			host, _ := os.Hostname()
			return fmt.Errorf("cluster: this host (%s) cannot write in the pool's output folder %s: %w; "+
				"the folder must be on storage that every host sees, at the same path", host, d, err)
		}
	}
	return nil
}

// probeFolder creates a private file in dir and removes it.
func probeFolder(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return errors.New("not a folder")
	}
	f, err := os.CreateTemp(dir, ".poolrun-probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	err = f.Close()
	if rerr := os.Remove(name); err == nil {
		err = rerr
	}
	return err
}

// maxJoinFile bounds the size of a join file that ReadJoinFile reads.
const maxJoinFile = 64 << 10

// WriteJoinFile writes j to path atomically (a temporary file in the same
// folder, renamed), with mode 0600: the file holds the pool's credential.
func WriteJoinFile(path string, j Join) error {
	data, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteMode(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("cluster: join file: %w", err)
	}
	return nil
}

// writeHeldJoinFile writes j to path as WriteJoinFile does, and returns
// the file open with a shared flock(2) of it, which lasts until the file
// is closed (or this process ends, however it ends). A pool holds its
// join file so while it runs: whoever can take an exclusive lock of the
// file knows that the pool that wrote it is gone, as poolrun's janitor
// does before it removes a killed pool's join file (package execflow). A
// join file at path that a live pool holds is refused: it is that pool's.
func writeHeldJoinFile(path string, j Join) (*os.File, error) {
	if old, err := regfile.Open(path); err == nil {
		err = flock(old, syscall.LOCK_EX|syscall.LOCK_NB)
		old.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("cluster: join file %s: another pool that runs now holds it; give this pool a join file of its own", path)
		}
	}
	if err := WriteJoinFile(path, j); err != nil {
		return nil, err
	}
	f, err := regfile.Open(path)
	if err == nil {
		err = flock(f, syscall.LOCK_SH)
	}
	if err == nil && !isFile(f, path) {
		err = errors.New("replaced as it was written")
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, fmt.Errorf("cluster: join file %s: %w", path, err)
	}
	return f, nil
}

// removeHeldJoinFile closes f, a join file that writeHeldJoinFile wrote at
// path, after emptying and removing path if it is f still: a file that
// another pool wrote there since is its own. Emptied, it tells an agent
// on this host that holds it open that the pool ended, rather than was
// killed (whose janitor removes it whole): see session.poolEnded.
func removeHeldJoinFile(f *os.File, path string) error {
	var err error
	if isFile(f, path) {
		os.Truncate(path, 0)
		err = os.Remove(path)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// isFile reports whether path names the open file f.
func isFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(path)
	return err == nil && os.SameFile(a, b)
}

// flock is flock(2) of f, again when a signal interrupts it.
func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

// ReadJoinFile reads the join file at path, which must be a regular file:
// a named pipe, a device or a directory is refused at once, without
// waiting for a writer, with an error that says what it is. It refuses a
// file that this process's user (its effective uid) does not own, root
// included: the file says whose pool to join, and a worker runs the
// commands that pool sends, so a file of another user's could make it run
// that user's commands as its own. As ssh does with a private key, it
// refuses a file that gives group or others any permission, since the
// file holds the pool's credential. Either error names the file and says
// what fixes it. The file must hold one JSON object and nothing after it
// but white space.
func ReadJoinFile(path string) (Join, error) {
	var j Join
	data, err := readPrivateFile(path)
	if err != nil {
		return j, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return j, fmt.Errorf("cluster: join file %s: byte %d: %w", path, se.Offset, err)
		}
		return j, fmt.Errorf("cluster: join file %s: %w", path, err)
	}
	// Bytes are counted from 1, as in json.SyntaxError's Offset above.
	end := dec.InputOffset()
	if i := bytes.IndexFunc(data[end:], notJSONSpace); i >= 0 {
		return j, fmt.Errorf("cluster: join file %s: byte %d: data after the join object", path, end+int64(i)+1)
	}
	switch {
	case j.URL == "":
		return j, fmt.Errorf("cluster: join file %s: no url", path)
	case j.Token == "":
		return j, fmt.Errorf("cluster: join file %s: no token", path)
	case j.Protocol <= 0:
		return j, fmt.Errorf("cluster: join file %s: no protocol version", path)
	}
	for _, d := range j.Outputs {
		if !filepath.IsAbs(d) {
			return j, fmt.Errorf("cluster: join file %s: output folder %q: not an absolute path", path, d)
		}
	}
	return j, nil
}

// readPrivateFile reads the join file at path, opened as regfile opens a
// file, after checking on the open descriptor (not on path, which may
// have been replaced since) that this process's user owns it and that
// only its owner has any permission on it. Errors name path.
func readPrivateFile(path string) ([]byte, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cluster: join file: %w", err) // names the path
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cluster: join file: %w", err) // names the path
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("cluster: join file %s is owned by uid %d, not by this process's user (uid %d): "+
			"a worker runs the commands of the pool that the file names, and joins only a pool of its own user's; "+
			"run the worker as uid %d, or chown %d %s",
			path, st.Uid, os.Geteuid(), st.Uid, os.Geteuid(), path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("cluster: join file %s has mode %04o: group or others have access to the pool's credential; "+
			"chmod 600 %s", path, perm, path)
	}
	// As regfile.ReadFile: refused by its size before a byte is read, and
	// at most one byte over the limit read, should it grow.
	if fi.Size() > maxJoinFile {
		return nil, tooLarge(path, fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxJoinFile+1))
	if err != nil {
		return nil, fmt.Errorf("cluster: join file: %w", err) // names the path
	}
	if len(data) > maxJoinFile {
		return nil, tooLarge(path, int64(len(data)))
	}
	return data, nil
}

// tooLarge is the error of a join file of size bytes, over maxJoinFile.
func tooLarge(path string, size int64) error {
	return fmt.Errorf("cluster: join file %s: %d bytes, larger than %d: not a join file", path, size, maxJoinFile)
}

// notJSONSpace reports whether r is not white space in JSON.
func notJSONSpace(r rune) bool {
	return r != ' ' && r != '\t' && r != '\n' && r != '\r'
}
