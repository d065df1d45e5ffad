package workflow

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrUnknownTarget is returned, wrapped, by [Workflow.Select] when a
// target matches no job of the workflow (or is a malformed pattern).
var ErrUnknownTarget = errors.New("unknown target")

// MaxErrors is the number of mistakes an [*Errors] lists at most; it
// counts the others in [Errors.More].
const MaxErrors = 20

// An Error reports one mistake in a workflow file and where it is. [Parse]
// returns them in an [*Errors]; use [errors.As] to get at the first one's
// fields.
type Error struct {
	File string // the file name given to Parse or Load
	Line int    // 1-based line of the offending text; 0 for a mistake of Options.Set
	Msg  string // what is wrong, naming the job id or item involved
}

// Error returns "FILE:LINE: MSG", leaving out LINE when it is 0.
func (e *Error) Error() string {
	if e.Line <= 0 {
		return e.File + ": " + e.Msg
	}
	return e.File + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
}

// Errors is the error of [Parse], and of [Load] for a file it could read:
// every mistake found in the file, each an [*Error], in the order of their
// lines. Parse goes on after a mistake wherever what follows can still be
// checked, so one Errors reports several at once; after a YAML syntax
// error, or past one of the limits on a workflow's size, nothing more can
// be read, and that mistake is the last. At most one mistake is reported
// per line (a foreach entry repeats its mistakes in every job it gives).
//
// Errors has Unwrap() []error, so [errors.As](err, &e), e an *Error,
// finds the first of List, and [errors.Is] looks through them all.
type Errors struct {
	// List holds the first MaxErrors mistakes found, sorted by line; it is
	// never empty.
	List []*Error
	// More counts the mistakes found beyond those in List.
	More int
}

// Error returns one line per mistake, FILE:LINE: MSG, and a last
// "... and N more" when More is not 0.
func (e *Errors) Error() string {
	var b strings.Builder
	for i, err := range e.List {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(err.Error())
	}
	if e.More > 0 {
		fmt.Fprintf(&b, "\n... and %d more", e.More)
	}
	return b.String()
}

// Unwrap returns the mistakes of List, for [errors.As] and [errors.Is].
func (e *Errors) Unwrap() []error {
	errs := make([]error, len(e.List))
	for i, err := range e.List {
		errs[i] = err
	}
	return errs
}
