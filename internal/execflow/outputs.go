package execflow

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/poolrun/poolrun/internal/workflow"
)

// This file decides what a job made of its declared outputs: it checks
// them once its command has exited 0, lists the files it made for the
// state file, and removes what it made when the job fails (make's
// .DELETE_ON_ERROR).
//
// A job's outputs are the files it made, never whatever happens to match
// its patterns: an output path is the job's by its declaration; of the
// files an output pattern matches, the job's are those its attempt
// created or changed, and those the state file records as made by it
// (outputs.Made). Any other file that a pattern matches (a user's source
// beside the job's files) is nobody's to remove or to count.

// outputs are a job's declared outputs, where its worker (or the pool's
// process) finds them. A job's argument carries them to its worker, so
// the fields are exported for gob; a job without outputs has none (nil),
// and every method of a nil *outputs does nothing.
type outputs struct {
	Dir folder
	// Root is Dir.Abs with its symbolic links followed: no output, and
	// nothing removed, lies outside it once links are followed.
	Root string
	List []string // as written in the workflow
	// Made holds the absolute paths of the files that the state file
	// records as made by the job under its output patterns, sorted.
	Made []string
	// Keep holds those of its output paths and Made that the job reads
	// too (its inputs name them): they are not moved aside (aside.go).
	Keep []string
	// Protect holds absolute paths that are never removed, nor is any
	// folder above them: the workflow file, its state file, the
	// commands' working folder.
	Protect []string
}

// outputsMaker makes the outputs of the jobs of one workflow.
type outputsMaker struct {
	dir     folder
	root    string
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
	root, err := filepath.EvalSymlinks(dir.Abs)
	if err != nil {
		return nil, fmt.Errorf("execflow: working folder: %w", err)
	}
	protect := []string{file, stateFile(file), work}
	for _, p := range slices.Clone(protect) {
		if real, err := filepath.EvalSymlinks(p); err == nil && real != p {
			protect = append(protect, real)
		}
	}
	return &outputsMaker{dir: dir, root: root, protect: protect}, nil
}

// of returns the outputs of job j, nil if it declares none; made are the
// files the state file records as made by it, relative to the working
// folder.
func (m *outputsMaker) of(j *workflow.Job, made []string) *outputs {
	if len(j.Outputs) == 0 {
		return nil
	}
	o := &outputs{Dir: m.dir, Root: m.root, List: j.Outputs, Protect: m.protect}
	for _, f := range made {
		o.Made = append(o.Made, m.dir.path(f))
	}
	slices.Sort(o.Made)
	reads := func(abs string) bool {
		for _, in := range j.Inputs {
			if workflow.Matches(m.dir.pattern(in), abs) || !workflow.IsPattern(in) && m.dir.path(in) == abs {
				return true
			}
		}
		return false
	}
	for _, p := range j.Outputs {
		if abs := m.dir.path(p); !workflow.IsPattern(p) && reads(abs) {
			o.Keep = append(o.Keep, abs)
		}
	}
	for _, abs := range o.Made {
		if reads(abs) {
			o.Keep = append(o.Keep, abs)
		}
	}
	return o
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

// mine reports whether the file abs that output p stands for is the
// job's, given what was there before its command ran: an output path is;
// a file that an output pattern matches is if it was not there before,
// or changed since, or the state file records it as the job's.
func (o *outputs) mine(p, abs string, before map[string]stamp) bool {
	if !workflow.IsPattern(p) || o.recorded(abs) {
		return true
	}
	old, existed := before[abs]
	if !existed {
		return true
	}
	now, ok := lstampOf(abs)
	return ok && !old.dir && !old.same(now)
}

// recorded reports whether the state file records abs as the job's.
func (o *outputs) recorded(abs string) bool {
	_, found := slices.BinarySearch(o.Made, abs)
	return found
}

// check returns an error, wrapping errOutputNotWritten and naming the
// output, for the first output that the command, which exited 0, did not
// make: a path where there is nothing, or a pattern that matches no file
// of the job's (see mine); and an error for an output that lies outside
// the working folder once links are followed. An output that is as it
// was before the command ran is made: a command that had nothing to do
// (cp -p, rsync -a, make) leaves it so. It returns the files of the job's
// that the patterns match, relative to the working folder, for the state
// file.
func (o *outputs) check(before map[string]stamp) (made []string, err error) {
	if o == nil {
		return nil, nil
	}
	for _, p := range o.List {
		found, others := false, ""
		for _, abs := range o.Dir.expand(p) {
			if _, ok := stampOf(abs); !ok {
				continue // a dangling symbolic link
			}
			if !o.mine(p, abs, before) {
				if others == "" {
					others = o.Dir.showMatch(p, abs)
				}
				continue
			}
			if err := o.inside(abs); err != nil {
				return nil, fmt.Errorf("output %s: %w", o.Dir.showMatch(p, abs), err)
			}
			found = true
			if workflow.IsPattern(p) {
				if rel, err := filepath.Rel(o.Dir.Abs, abs); err == nil {
					made = append(made, rel)
				}
			}
		}
		if found {
			continue
		}
		why := ""
		switch {
		case others != "":
			why = fmt.Sprintf(" (the command made no file that the pattern matches; %s was there before, and is not the job's)", others)
		case workflow.IsPattern(p):
			why = " (nothing matches the pattern)"
		}
		return nil, fmt.Errorf("output %s: %w%s", o.Dir.showAs(p), errOutputNotWritten, why)
	}
	slices.Sort(made)
	return slices.Compact(made), nil
}

// inside returns an error when the folder that holds abs lies outside
// the working folder once symbolic links are followed (abs itself may be
// a link: it is removed, never what it points to).
func (o *outputs) inside(abs string) error {
	if o.Root == "" {
		return nil
	}
	real, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return nil // gone: nothing there to reach
	}
	if rel, err := filepath.Rel(o.Root, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("it lies in %s once links are followed, outside the working folder %s", real, o.Root)
	}
	return nil
}

// same reports whether a and b are the stamps of one unchanged file.
func (a stamp) same(b stamp) bool {
	return a.mtime.Equal(b.mtime) && a.size == b.size && a.ino == b.ino && a.dir == b.dir
}

// remove removes what the command wrote of the outputs, before being what
// snapshot returned before it ran: every file at an output path, or
// recorded as the job's, that was not there then or that changed since
// (its modification time, size or inode), every other file an output
// pattern matches that was not there then, and every folder that was not
// there then, with what it holds (os.RemoveAll; a symbolic link, not
// what it points to). A file as it was, a folder that was there before,
// and a file that was there before that is not the job's stay, whatever
// happened to them. It never removes a
// protected path nor a folder above one, nor anything outside the working
// folder once links are followed. It returns what it removed, as
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
			if _, existed := before[abs]; existed && workflow.IsPattern(p) && !o.recorded(abs) {
				continue // not the job's: a user's, or changed by someone else
			}
			now, exists := lstampOf(abs)
			if !exists {
				continue
			}
			if old, existed := before[abs]; existed && (old.dir || old.same(now)) {
				continue
			}
			if err := o.inside(abs); err != nil {
				errs = append(errs, fmt.Errorf("%s: not removed: %w", abs, err))
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

// finishOutputs is the end of job a's run in its worker, whose last
// outputs setAside moved to aside: when the command exited 0 (runErr is
// nil), it checks that the outputs are there (see check), drops the last
// ones and returns the files the job made under its output patterns;
// when the run failed, or an output is missing, it removes what the
// command wrote of them (see remove), so that nothing half-written passes
// for done, puts the last ones back, and returns the job's error, with a
// last line that names what it removed (which poolrun run prints, and
// its report holds). What cannot be removed, dropped or put back is said
// on standard error.
func finishOutputs(a execArg, before map[string]stamp, aside []moved, runErr error) ([]string, error) {
	o := a.Outputs
	if o == nil {
		return nil, runErr
	}
	if runErr == nil {
		made, err := o.check(before)
		if err == nil {
			if err := o.drop(aside); err != nil {
				fmt.Fprintf(os.Stderr, "poolrun: job %q (%s:%d): the last run's outputs could not all be removed: %v\n", a.ID, a.File, a.Line, err)
			}
			return made, nil
		}
		runErr = fmt.Errorf("job %q (%s:%d): %w", a.ID, a.File, a.Line, err)
	}
	removed, err := o.remove(before)
	if err != nil {
		fmt.Fprintf(os.Stderr, "poolrun: job %q (%s:%d) failed, and what it wrote could not all be removed: %v\n", a.ID, a.File, a.Line, err)
	}
	if err := o.putBack(aside); err != nil {
		fmt.Fprintf(os.Stderr, "poolrun: job %q (%s:%d) failed, and the last run's outputs could not all be put back: %v\n", a.ID, a.File, a.Line, err)
	}
	if len(removed) == 0 {
		return nil, runErr
	}
	rerr := &removedError{err: runErr, removed: removed}
	noteInterrupted(a, rerr) // the pool drops an interrupted run's error
	return nil, rerr
}

// removedError is a failed job's error, with the outputs that were removed
// because it wrote them.
type removedError struct {
	err     error
	removed []string
}

func (e *removedError) Error() string { return e.err.Error() + "\n" + e.line() }

// line is the last line of the error, which names what was removed.
func (e *removedError) line() string { return removedPrefix + strings.Join(e.removed, ", ") }

func (e *removedError) Unwrap() error { return e.err }

// removedPrefix begins the last line of a failed job's error that names
// what poolrun removed.
const removedPrefix = "poolrun removed what the job wrote: "
