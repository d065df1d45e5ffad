package execflow

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"

	"github.com/poolrun/poolrun/internal/atomicfile"
	"github.com/poolrun/poolrun/internal/regfile"
	"github.com/poolrun/poolrun/internal/workflow"
)

// This file reads and writes a workflow's state file: the command each
// job's outputs were made by.

// stateVersion is the version of the state file's format, its "version"
// field. Version 1 had no status: its records are read as done. Version 2
// had no made: a job with output patterns recorded there is not done.
const stateVersion = 3

// maxStateSize bounds the size of a state file that a [Plan] reads: 4 GiB,
// some 400 bytes for each of workflow.MaxJobs jobs.
const maxStateSize = 4 << 30

// stateFile returns the path of the state file of the workflow file at
// path: ".NAME.poolrun-state" in the same folder, where NAME is the
// workflow file's name.
func stateFile(path string) string { return workflow.StateFile(path) }

// state is the content of a state file, in JSON:
//
//	{"version": 3, "jobs": {"ID": {"command": "HASH", "status": "started", "made": ["out/a.txt"]}, ...}}
//
// HASH is [commandHash] of the job's command. A record without status says
// that the job's outputs are done: that command made them, as the job last
// succeeded (or was found up to date). inputs is what its input patterns
// matched then ([MatchedInputs]): a change reruns it. made lists the files the job made
// that its output patterns match (Result.Outputs), relative to the
// working folder: a job's output paths are its own by their declaration,
// a file its patterns match is its own only when listed there. "started" says that a run began the
// job and did not see it end (it was cut off), "failed" that the job's
// last run failed: either way what its outputs hold is not done.
type state struct {
	Version int                 `json:"version"`
	Jobs    map[string]jobState `json:"jobs"`
}

// jobState is what the state file holds of one job.
type jobState struct {
	Command string   `json:"command"`
	Status  string   `json:"status,omitempty"` // "", statusStarted or statusFailed
	Made    []string `json:"made,omitempty"`
	// Inputs is what the job's input patterns matched when it last
	// succeeded; nil if it has none, or the file does not say.
	Inputs *MatchedInputs `json:"inputs,omitempty"`
}

// The statuses of a job that is not done.
const (
	statusStarted = "started"
	statusFailed  = "failed"
)

// commandHash returns the hash of a job's command text, as the state file
// holds it: the first 128 bits of its SHA-256, in hexadecimal.
func commandHash(run string) string {
	sum := sha256.Sum256([]byte(run))
	return hex.EncodeToString(sum[:16])
}

// readState reads the state file at path; a file that does not exist is
// an empty state. An unreadable, malformed or too large file, or one that
// is not a regular file, is an error that names it and wraps
// errBadState.
func readState(path string) (*state, error) {
	bad := func(what string) error {
		return fmt.Errorf("%w: %s: %s; delete it to start afresh (jobs are then judged by the times of their files alone)", errBadState, path, what)
	}
	// A FIFO or a device there is refused at once, not waited for.
	data, err := regfile.ReadFile(path, maxStateSize)
	var big *regfile.TooLargeError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &state{Version: stateVersion}, nil
	case errors.As(err, &big):
		return nil, bad(fmt.Sprintf("%d bytes, larger than %d MiB", big.Size, maxStateSize>>20))
	case err != nil:
		return nil, fmt.Errorf("%w: %w", errBadState, err)
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, bad(err.Error())
	}
	if st.Version < 1 || st.Version > stateVersion {
		return nil, bad(fmt.Sprintf("version %d, want 1 to %d", st.Version, stateVersion))
	}
	for id, rec := range st.Jobs {
		if st.Version == 1 && rec.Status != "" || rec.Status != "" && rec.Status != statusStarted && rec.Status != statusFailed {
			return nil, bad(fmt.Sprintf("job %q: unknown status %q", id, rec.Status))
		}
	}
	st.Version = stateVersion
	return &st, nil
}

// equal reports whether s and t hold the same records.
func (s *state) equal(t *state) bool {
	return maps.EqualFunc(s.Jobs, t.Jobs, func(a, b jobState) bool {
		return a.Command == b.Command && a.Status == b.Status && slices.Equal(a.Made, b.Made) &&
			(a.Inputs == nil) == (b.Inputs == nil) && (a.Inputs == nil || a.Inputs.Hash == b.Inputs.Hash)
	})
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
	return atomicfile.Write(path, append(data, '\n'))
}
