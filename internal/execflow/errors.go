package execflow

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/poolrun/poolrun/engine"
)

// errNoArtefact is wrapped by the error of an item whose command exited with
// status 0 but left nothing at the path in $POOLRUN_ITEM. Only the message
// reaches the pool's process (see asCommandError).
var errNoArtefact = errors.New("the command exited 0 but created nothing at $POOLRUN_ITEM")

// errOutputNotWritten is wrapped by the error of a job whose command exited
// with status 0 but did not make one of the job's declared outputs: nothing
// is at its path, or nothing matches its pattern; the error names the
// output. Only the message reaches the pool's process.
var errOutputNotWritten = errors.New("the command exited 0 without making this output")

// errBadState is wrapped by the error of [NewPlan] when the workflow's state
// file (stateFile) cannot be read, or is not a state file of this
// version; the error names the file.
var errBadState = errors.New("execflow: bad state file")

// errNoSource is wrapped by the error of [NewPlan] when an input that no
// job makes does not exist (make's "No rule to make target"); the error
// names the job, its line and the input.
var errNoSource = errors.New("it does not exist, and no job makes it")

// A commandError reports a command that exited with a non-zero status or was
// killed by a signal: a job's own command, or the command that builds an
// item the job needs.
//
// Its message is one line, then the tail of the command's standard error:
//
//	job "ID" (FILE:LINE): exit status N
//	job "ID": item "NAME" (FILE:LINE): killed by signal SIGKILL
//
// where FILE:LINE is the job's (or the item's) place in the workflow file.
type commandError struct {
	// JobID is the workflow id of the job that failed.
	JobID string
	// Item is the name of the item whose command failed, or "" when the
	// job's own command did.
	Item string
	// File and Line locate the job (or the item) in the workflow file.
	File string
	Line int
	// ExitCode is the command's exit status, or -1 when it was killed by a
	// signal.
	ExitCode int
	// Signal is the name of the signal that killed the command, as
	// "SIGKILL", or "" when it exited.
	Signal string
	// StderrTail holds the last lines of the command's standard error (see
	// [Options.TailLines]), without the final newline.
	StderrTail string
	// PeakRSS is the peak resident memory of the command's largest
	// process, in bytes, where it is clearly more (see rssMargin) than
	// that of the process that started it (see Result.PeakRSS); else 0. The message gives it in
	// KiB, after the status: "exit status 1 (peak RSS 812000 KiB)".
	PeakRSS int64
}

// Error returns the message described at commandError.
func (e *commandError) Error() string {
	var b strings.Builder
	if e.JobID != "" {
		b.WriteString("job ")
		b.WriteString(strconv.Quote(e.JobID))
		if e.Item != "" {
			b.WriteString(": ")
		}
	}
	if e.Item != "" {
		b.WriteString("item ")
		b.WriteString(strconv.Quote(e.Item))
	}
	fmt.Fprintf(&b, " (%s:%d): ", e.File, e.Line)
	if e.Signal != "" {
		b.WriteString("killed by signal ")
		b.WriteString(e.Signal)
	} else {
		fmt.Fprintf(&b, "exit status %d", e.ExitCode)
	}
	if e.PeakRSS > 0 {
		fmt.Fprintf(&b, " (peak RSS %d KiB)", e.PeakRSS>>10)
	}
	if e.StderrTail != "" {
		b.WriteByte('\n')
		b.WriteString(e.StderrTail)
	}
	return b.String()
}

// asCommandError finds the first commandError in err's tree (through Unwrap,
// as errors.As does). A job's commandError reaches the pool's process as an
// *engine.RemoteError that holds only its message (with workers, and in
// serial mode too); such an error, when its message has the form of a
// commandError's, is turned back into one (File must not contain a
// newline). The second result is false when err holds neither. Use it on the
// error of a job's Result, or on Run's error for the first failed command.
func asCommandError(err error) (*commandError, bool) {
	var found *commandError
	walkErrors(err, func(e error) bool {
		switch x := e.(type) {
		case *commandError:
			found = x
		case *engine.RemoteError:
			if ce, ok := parseCommandError(x.Msg); ok {
				found = ce
			}
		}
		return found != nil
	})
	return found, found != nil
}

// walkErrors calls visit on err and the errors it wraps, depth first, until
// visit returns true.
func walkErrors(err error, visit func(error) bool) bool {
	if err == nil {
		return false
	}
	if visit(err) {
		return true
	}
	switch x := err.(type) {
	case interface{ Unwrap() error }:
		return walkErrors(x.Unwrap(), visit)
	case interface{ Unwrap() []error }:
		for _, e := range x.Unwrap() {
			if walkErrors(e, visit) {
				return true
			}
		}
	}
	return false
}

// parseCommandError reverses [commandError.Error].
func parseCommandError(msg string) (*commandError, bool) {
	head, tail, _ := strings.Cut(msg, "\n")
	if line := removedLineOf(msg); line != "" {
		tail = strings.TrimSuffix(strings.TrimSuffix(tail, line), "\n") // finishOutputs' line, not the command's
	}
	ce := &commandError{StderrTail: tail}
	quoted := func(prefix string) (string, bool) {
		if !strings.HasPrefix(head, prefix) {
			return "", false
		}
		q, err := strconv.QuotedPrefix(head[len(prefix):])
		if err != nil || q[0] != '"' {
			return "", false
		}
		s, err := strconv.Unquote(q)
		if err != nil {
			return "", false
		}
		head = head[len(prefix)+len(q):]
		return s, true
	}
	if id, ok := quoted("job "); ok {
		ce.JobID = id
		if strings.HasPrefix(head, ": item ") {
			head = head[len(": "):]
		}
	}
	if name, ok := quoted("item "); ok {
		ce.Item = name
	}
	if ce.JobID == "" && ce.Item == "" || !strings.HasPrefix(head, " (") {
		return nil, false
	}
	head = head[len(" ("):]
	i := strings.LastIndex(head, "): ")
	if i < 0 {
		return nil, false
	}
	place, status := head[:i], head[i+len("): "):]
	j := strings.LastIndexByte(place, ':')
	if j < 0 {
		return nil, false
	}
	line, err := strconv.Atoi(place[j+1:])
	if err != nil {
		return nil, false
	}
	ce.File, ce.Line = place[:j], line
	if i := strings.LastIndex(status, " (peak RSS "); i >= 0 && strings.HasSuffix(status, " KiB)") {
		kib, err := strconv.ParseInt(status[i+len(" (peak RSS "):len(status)-len(" KiB)")], 10, 64)
		if err != nil || kib < 0 {
			return nil, false
		}
		ce.PeakRSS, status = kib<<10, status[:i]
	}
	if sig, ok := strings.CutPrefix(status, "killed by signal "); ok && sig != "" && !strings.ContainsAny(sig, " \t") {
		ce.ExitCode, ce.Signal = -1, sig
		return ce, true
	}
	code, ok := strings.CutPrefix(status, "exit status ")
	if !ok {
		return nil, false
	}
	if ce.ExitCode, err = strconv.Atoi(code); err != nil {
		return nil, false
	}
	return ce, true
}

// itemError is the failure of an item's build other than its command's
// exit status: the scratch folder, a command that could not start, no
// artefact.
type itemError struct {
	Item string
	File string
	Line int
	Err  error
}

func (e *itemError) Error() string {
	return fmt.Sprintf("item %q (%s:%d): %v", e.Item, e.File, e.Line, e.Err)
}

func (e *itemError) Unwrap() error { return e.Err }

// A Failure is how a job's command, or the command of an item it needed,
// failed, as a job's (or one of its runs') error says.
type Failure struct {
	// Item is the name of the item whose command failed, or "" when the
	// job's own command did.
	Item string
	// ExitCode is the command's exit status, or -1 when it was killed by a
	// signal.
	ExitCode int
	// Signal is the name of the signal that killed the command, as
	// "SIGKILL", or "".
	Signal string
	// StderrTail holds the last lines of the command's standard error
	// (see [Options.TailLines]), without the final newline.
	StderrTail string
	// PeakRSS is the command's peak resident memory in bytes, to the KiB,
	// where it was more than that of the process that started it; else 0.
	PeakRSS int64
}

// FailureOf returns how the command failed whose exit err reports: the
// error of a job queued by [Queue], as engine.Job.Result or an
// engine.Attempt gives it, or of a run in an event. The second result
// is false when err is not a command's exit status or signal (a timeout,
// a cancel, a worker's death, a command that could not start, an output
// missing after a command that exited 0).
func FailureOf(err error) (Failure, bool) {
	ce, ok := asCommandError(err)
	if !ok {
		return Failure{}, false
	}
	return Failure{Item: ce.Item, ExitCode: ce.ExitCode, Signal: ce.Signal, StderrTail: ce.StderrTail, PeakRSS: ce.PeakRSS}, true
}

// RemovedLine returns the line of err, the error of a job queued by
// [Queue] (as engine.Job.Result or an engine.Attempt gives it), that names
// what its worker removed of the job's outputs after its run failed
// ("poolrun removed what the job wrote: a.txt, parts/1.part"), or "" if
// err names nothing removed. It finds the line in what a run that passed
// its timeout returned too (engine.TimeoutError's Returned).
func RemovedLine(err error) string {
	var line string
	walkErrors(err, func(e error) bool {
		switch x := e.(type) {
		case *removedError:
			line = x.line()
		case *engine.RemoteError:
			line = removedLineOf(x.Msg)
		case *engine.TimeoutError:
			line = removedLineOf(x.Returned)
		}
		return line != ""
	})
	return line
}

// removedLineOf returns the last line of msg, a job's error message, if
// it is the line of a removedError, else "".
func removedLineOf(msg string) string {
	i := strings.LastIndexByte(msg, '\n')
	if line := msg[i+1:]; i >= 0 && strings.HasPrefix(line, removedPrefix) {
		return line
	}
	return ""
}

// interrupted keeps what the runs of this process removed of their jobs'
// outputs when the pool was interrupted under them, for [Interrupted]:
// the line of each, by workflow file and job id.
var interrupted struct {
	mu    sync.Mutex
	lines map[[2]string]string
}

// noteInterrupted records, for [Interrupted], the line of err, the error
// of job a's run that removed what it wrote, if the end of its worker's
// context stopped it (context.Canceled: the pool was interrupted).
func noteInterrupted(a execArg, err *removedError) {
	if !errors.Is(err.err, context.Canceled) {
		return
	}
	interrupted.mu.Lock()
	defer interrupted.mu.Unlock()
	if interrupted.lines == nil {
		interrupted.lines = make(map[[2]string]string)
	}
	interrupted.lines[[2]string{a.File, a.ID}] = err.line()
}

// Interrupted returns, once, the line that names what the run of job id
// of the workflow file (as workflow.Workflow.File names it) removed of
// the job's outputs when the pool was interrupted under it (Run's context
// ended), as [RemovedLine] finds it in a failed job's error; "" if it
// removed nothing. The pool ends such a job (Aborted) as it stops, and
// drops the error that the run returns after that. Only the runs of this
// process are known: those of workers that are goroutines of it
// (engine.InProcess, serial mode), as poolrun run's are; not those of a
// worker process.
func Interrupted(file, id string) string {
	interrupted.mu.Lock()
	defer interrupted.mu.Unlock()
	k := [2]string{file, id}
	line := interrupted.lines[k]
	delete(interrupted.lines, k)
	return line
}

// RSSAbove reports whether peak, the peak RSS of a command (as
// [Result.PeakRSS] gives it), is clearly more than floor, the peak RSS of
// the process that started it: Linux counts that process's memory in the
// command's peak, so a figure not above it says only that the command
// used no more.
func RSSAbove(peak, floor int64) bool { return peak > floor+rssMargin(floor) }
