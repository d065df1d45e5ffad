package execflow

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"slices"

	"github.com/poolrun/poolrun/internal/workflow"
)

// This file records which files a job's input patterns matched when its
// command started, so that a file added to them, or one gone, reruns the
// job whatever its time (a copied or untarred file keeps an old one), as
// Snakemake's input trigger does.

// maxListedInputs bounds the files that [MatchedInputs] lists: past it,
// the state file holds their hash and count alone.
const maxListedInputs = 256

// MatchedInputs is what a job's input patterns matched when its command
// started: every file and folder, relative to the working folder.
type MatchedInputs struct {
	// Count is the number of files; Hash a hash of their sorted names
	// (the first 128 bits of a SHA-256, in hexadecimal); "" when the job
	// has no input pattern.
	Count int    `json:"n"`
	Hash  string `json:"hash"`
	// Files lists them, sorted, when they are at most 256; else nil.
	Files []string `json:"files,omitempty"`
}

// inputPatterns returns the inputs of j that are patterns, as written.
func inputPatterns(j *workflow.Job) []string {
	var out []string
	for _, in := range j.Inputs {
		if workflow.IsPattern(in) {
			out = append(out, in)
		}
	}
	return out
}

// matchInputs returns what patterns (inputs as written) match in dir now.
func matchInputs(dir folder, patterns []string) MatchedInputs {
	if len(patterns) == 0 {
		return MatchedInputs{}
	}
	var files []string
	for _, p := range patterns {
		for _, abs := range dir.expand(p) {
			if _, ok := stampOf(abs); !ok {
				continue
			}
			if rel, err := filepath.Rel(dir.Abs, abs); err == nil {
				files = append(files, rel)
			}
		}
	}
	slices.Sort(files)
	files = slices.Compact(files)
	h := sha256.New()
	for _, f := range files {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	m := MatchedInputs{Count: len(files), Hash: hex.EncodeToString(h.Sum(nil)[:16])}
	if len(files) <= maxListedInputs {
		m.Files = files
	}
	return m
}

// changed compares what the job's input patterns match now (now) with
// what they matched when it last ran (was, from the state file): it
// returns false when they match the same files, or when nothing was
// recorded; else a file added or gone, "" when was does not list its
// files, and whether it was added.
func (was *MatchedInputs) changed(now MatchedInputs) (file string, added, differ bool) {
	if was == nil || was.Hash == "" || was.Hash == now.Hash {
		return "", false, false
	}
	if was.Files == nil && was.Count > 0 || now.Files == nil && now.Count > 0 {
		return "", false, true
	}
	for _, f := range now.Files {
		if _, found := slices.BinarySearch(was.Files, f); !found {
			return f, true, true
		}
	}
	for _, f := range was.Files {
		if _, found := slices.BinarySearch(now.Files, f); !found {
			return f, false, true
		}
	}
	return "", false, true
}
