package workflow

import (
	"fmt"
	"strconv"
)

// ErrTooLarge is returned by [Load] when the file holds more than
// [MaxFileSize] bytes.
var ErrTooLarge = fmt.Errorf("workflow: file larger than the limit of %d MiB (workflow.MaxFileSize)", MaxFileSize>>20)

// An Error reports what is wrong with a workflow file and where. Every error
// that [Parse] returns, and every error of [Load] except a failure to read
// the file and [ErrTooLarge], is an *Error; use [errors.As] to get at its
// fields.
type Error struct {
	File string // the file name given to Parse or Load
	Line int    // 1-based line of the offending text; never 0 from Parse
	Msg  string // what is wrong, naming the job id or item involved
}

// Error returns "FILE:LINE: MSG", leaving out LINE when it is 0.
func (e *Error) Error() string {
	if e.Line <= 0 {
		return e.File + ": " + e.Msg
	}
	return e.File + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
}
