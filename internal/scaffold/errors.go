package scaffold

import (
	"errors"
	"fmt"
)

// errUnknownType is returned when a cell type name is not in the configuration.
var errUnknownType = errors.New("scaffold: unknown cell type")

// errUnknownRule is returned when a connection rule is not in the configuration,
// or differs from the configuration's rule of the same name.
var errUnknownRule = errors.New("scaffold: unknown connection rule")

// errBadChunk is returned when a [Chunk] is not one of [Config.Chunks].
var errBadChunk = errors.New("scaffold: chunk not in the configuration's grid")

// errBadFile is returned when an output file is not what the configuration
// predicts: wrong magic number, format version, configuration hash, record
// count or size. It usually means the file was written by a run of another
// configuration, or read before the job that writes it finished.
var errBadFile = errors.New("scaffold: bad output file")

// errWrongIndex is returned by [Connect] when the index it is given is not the
// index of the rule's source type under the same configuration.
var errWrongIndex = errors.New("scaffold: index does not match the rule")

// ConfigError is one problem found in a configuration. [ParseConfig] returns
// one *ConfigError, or several joined with [errors.Join]; use [errors.As] to
// reach the first.
type ConfigError struct {
	File string // the file name given to ParseConfig; empty from [Config.Validate]
	Line int    // 1-based line in File; 0 when unknown
	Msg  string // what is wrong, naming the field
}

// Error returns "FILE:LINE: MSG", or "MSG" when no file is known.
func (e *ConfigError) Error() string {
	switch {
	case e.File == "":
		return e.Msg
	case e.Line == 0:
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}
