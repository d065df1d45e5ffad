package execflow

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// This file reads and writes a workflow's state file: the command each
// job's outputs were made by.

// StateSuffix ends the name of a workflow's state file: the state of
// "wf.yaml" is ".wf.yaml" + StateSuffix, in the same folder.
const StateSuffix = ".poolrun-state"

// StateVersion is the version of the state file's format, its "version"
// field.
const StateVersion = 1

// MaxStateSize bounds the size of a state file that a [Plan] reads: 64 MiB,
// some 600 bytes for each of workflow.MaxJobs jobs.
const MaxStateSize = 64 << 20

// StateFile returns the path of the state file of the workflow file at
// path: ".NAME.poolrun-state" in the same folder, where NAME is the
// workflow file's name.
func StateFile(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+StateSuffix)
}

// state is the content of a state file, in JSON:
//
//	{"version": 1, "jobs": {"ID": {"command": "HASH"}, ...}}
//
// HASH is [commandHash] of the command that made the job's outputs, as
// the job last succeeded (or was found up to date).
type state struct {
	Version int                 `json:"version"`
	Jobs    map[string]jobState `json:"jobs"`
}

// jobState is what the state file holds of one job.
type jobState struct {
	Command string `json:"command"`
}

// commandHash returns the hash of a job's command text, as the state file
// holds it: the first 128 bits of its SHA-256, in hexadecimal.
func commandHash(run string) string {
	sum := sha256.Sum256([]byte(run))
	return hex.EncodeToString(sum[:16])
}

// readState reads the state file at path; a file that does not exist is
// an empty state. An unreadable, malformed or too large file is an error
// that names it and wraps [ErrBadState].
func readState(path string) (*state, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &state{Version: StateVersion}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadState, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxStateSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadState, err)
	}
	bad := func(what string) error {
		return fmt.Errorf("%w: %s: %s; delete it to start afresh (jobs are then judged by the times of their files alone)", ErrBadState, path, what)
	}
	if len(data) > MaxStateSize {
		return nil, bad(fmt.Sprintf("larger than %d MiB", MaxStateSize>>20))
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, bad(err.Error())
	}
	if st.Version != StateVersion {
		return nil, bad(fmt.Sprintf("version %d, want %d", st.Version, StateVersion))
	}
	return &st, nil
}

// equal reports whether s and t hold the same records.
func (s *state) equal(t *state) bool {
	return maps.Equal(s.Jobs, t.Jobs)
}

// writeState writes st to the state file at path atomically: into a
// temporary file in the same folder, created exclusively under a random
// name (never through a symbolic link) with mode 0666 less the umask,
// synced and renamed to path. A symbolic link at path is refused, neither
// followed nor replaced.
func writeState(path string, st *state) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	f, err := createTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			err = fmt.Errorf("%s is a symbolic link: refusing to write through it or replace it", path)
		}
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// createTemp creates a new file in dir named prefix and random digits,
// exclusively (an existing name, a symbolic link included, is never
// opened: another is drawn), with mode 0666 less the umask; os.CreateTemp
// would make it 0600 whatever the umask.
func createTemp(dir, prefix string) (*os.File, error) {
	for range 100 {
		name := filepath.Join(dir, prefix+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if !errors.Is(err, os.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("no free name for a temporary file %s* in %s", prefix, dir)
}
