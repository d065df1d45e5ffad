package execflow

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/poolrun/poolrun/internal/workflow"
)

// This file checks a job's declared outputs once its command has exited 0,
// and removes them when the job fails (make's .DELETE_ON_ERROR).

// outputs are a job's declared outputs, where its worker (or the pool's
// process) finds them. A job's argument carries them to its worker, so
// the fields are exported for gob; a job without outputs has none (nil),
// and every method of a nil *outputs does nothing.
type outputs struct {
	Dir  folder
	List []string // as written in the workflow
	// Protect holds absolute paths that are never removed, nor is any
	// folder above them: the workflow file, its state file, the
	// commands' working folder.
	Protect []string
}

// outputsMaker makes the outputs of the jobs of one workflow.
type outputsMaker struct {
	dir     folder
	protect []string
}

// newOutputsMaker returns the maker of the outputs of wf's jobs, whose
// commands run in the folder work (absolute).
func newOutputsMaker(wf *workflow.Workflow, work string) (*outputsMaker, error) {
	dir, err := folderOf(wf)
	if err != nil {
		return nil, err
	}
	file, err := filepath.Abs(wf.File)
	if err != nil {
		return nil, fmt.Errorf("execflow: %s: %w", wf.File, err)
	}
	return &outputsMaker{dir: dir, protect: []string{file, stateFile(file), work}}, nil
}

// of returns the outputs of job j, nil if it declares none.
func (m *outputsMaker) of(j *workflow.Job) *outputs {
	if len(j.Outputs) == 0 {
		return nil
	}
	return &outputs{Dir: m.dir, List: j.Outputs, Protect: m.protect}
}

// snapshot returns the stamp of every file and folder that the outputs
// stand for, by absolute path: what there is before the command runs.
func (o *outputs) snapshot() map[string]stamp {
	if o == nil {
		return nil
	}
	before := make(map[string]stamp)
	for _, p := range o.List {
		for _, abs := range o.Dir.expand(p) {
			if st, ok := lstampOf(abs); ok {
				before[abs] = st
			}
		}
	}
	return before
}

// check returns an error, wrapping errOutputNotWritten and naming the
// output, for the first output that the command, which exited 0, did not
// make: a path where there is nothing, or a pattern that matches nothing.
// An output that is as it was before the command ran is made: a command
// that had nothing to do (cp -p, rsync -a, make) leaves it so.
func (o *outputs) check() error {
	if o == nil {
		return nil
	}
	for _, p := range o.List {
		found := false
		for _, abs := range o.Dir.expand(p) {
			if _, ok := stampOf(abs); ok { // not a dangling symbolic link
				found = true
				break
			}
		}
		if found {
			continue
		}
		why := ""
		if isPattern(p) {
			why = " (nothing matches the pattern)"
		}
		return fmt.Errorf("output %s: %w%s", o.Dir.showAs(p), errOutputNotWritten, why)
	}
	return nil
}

// same reports whether a and b are the stamps of one unchanged file.
func (a stamp) same(b stamp) bool {
	return a.mtime.Equal(b.mtime) && a.size == b.size && a.ino == b.ino && a.dir == b.dir
}

// remove removes what the command wrote of the outputs, before being what
// snapshot returned before it ran: every file the outputs stand for that
// was not there then, or that changed since (its modification time, size
// or inode), and every folder that was not there then, with what it holds
// (os.RemoveAll; a symbolic link, not what it points to). A file as it
// was, and a folder that was there before, stay. It never removes a
// protected path nor a folder above one. It returns what it removed, as
// messages name them, and the errors, each naming its path, joined.
func (o *outputs) remove(before map[string]stamp) (removed []string, err error) {
	if o == nil {
		return nil, nil
	}
	var errs []error
	for _, p := range o.List {
		for _, abs := range o.Dir.expand(p) {
			if o.protected(abs) {
				continue
			}
			now, exists := lstampOf(abs)
			if !exists {
				continue
			}
			if old, existed := before[abs]; existed && (old.dir || old.same(now)) {
				continue
			}
			if err := os.RemoveAll(abs); err != nil {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, o.Dir.showMatch(p, abs))
		}
	}
	return removed, errors.Join(errs...)
}

// lstampOf is stampOf for the path itself where it is a symbolic link
// that points nowhere: a link the command made is removed too.
func lstampOf(abs string) (stamp, bool) {
	if st, ok := stampOf(abs); ok {
		return st, true
	}
	fi, err := os.Lstat(abs)
	if err != nil {
		return stamp{}, false
	}
	return stamp{mtime: fi.ModTime(), size: fi.Size(), ino: inode(fi)}, true
}

// protected reports whether abs is one of o.Protect or a folder above one.
func (o *outputs) protected(abs string) bool {
	if abs == string(filepath.Separator) {
		return true
	}
	for _, p := range o.Protect {
		if p == abs || strings.HasPrefix(p, abs+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// finishOutputs is the end of job a's run in its worker: when the command
// exited 0 (runErr is nil), it checks that the outputs are there (see
// check); when the run failed, or an output is missing, it removes what
// the command wrote of them (see remove), so that nothing half-written
// passes for done, and returns the job's error, with a last line that
// names what it removed (which poolrun run prints, and its report holds).
// What cannot be removed is said on standard error.
func finishOutputs(a execArg, before map[string]stamp, runErr error) error {
	o := a.Outputs
	if o == nil {
		return runErr
	}
	if runErr == nil {
		err := o.check()
		if err == nil {
			return nil
		}
		runErr = fmt.Errorf("job %q (%s:%d): %w", a.ID, a.File, a.Line, err)
	}
	removed, err := o.remove(before)
	if err != nil {
		fmt.Fprintf(os.Stderr, "poolrun: job %q (%s:%d) failed, and what it wrote could not all be removed: %v\n", a.ID, a.File, a.Line, err)
	}
	if len(removed) == 0 {
		return runErr
	}
	return &removedError{err: runErr, removed: removed}
}

// removedError is a failed job's error, with the outputs that were removed
// because it wrote them.
type removedError struct {
	err     error
	removed []string
}

func (e *removedError) Error() string {
	return e.err.Error() + "\n" + removedPrefix + strings.Join(e.removed, ", ")
}

func (e *removedError) Unwrap() error { return e.err }

// removedPrefix begins the last line of a failed job's error that names
// what poolrun removed.
const removedPrefix = "poolrun removed what the job wrote: "
