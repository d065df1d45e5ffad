package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

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
			host, _ := osHostname()
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

// ReadJoinFile reads the join file at path, which must be a regular file:
// a named pipe, a device or a directory is refused at once, without
// waiting for a writer, with an error that says what it is.
func ReadJoinFile(path string) (Join, error) {
	var j Join
	data, err := regfile.ReadFile(path, maxJoinFile)
	var big *regfile.TooLargeError
	switch {
	case errors.As(err, &big):
		return j, fmt.Errorf("cluster: join file %s: %d bytes, larger than %d: not a join file", path, big.Size, maxJoinFile)
	case err != nil:
		return j, fmt.Errorf("cluster: join file: %w", err) // names the path
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
