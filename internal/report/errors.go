package report

import "errors"

// Errors of [Load] and [Decode], each wrapped with the file's name.
var (
	// ErrNotReport is returned when a file is not a report of poolrun:
	// not JSON, or neither a pool's (command, workers, jobs, totals) nor
	// a bench's (command "bench", results).
	ErrNotReport = errors.New("not a poolrun report")
	// ErrVersion is returned when a report's version is newer than
	// [Version] (or not a version at all).
	ErrVersion = errors.New("unknown report version")
)
