package execflow

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/poolrun/poolrun/engine"
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
	dir, err := folderOf(wf.File)
	if err != nil {
		return nil, err
	}
	file, err := filepath.Abs(wf.File)
	if err != nil {
		return nil, fmt.Errorf("execflow: %s: %w", wf.File, err)
	}
	return &outputsMaker{dir: dir, protect: []string{file, StateFile(file), work}}, nil
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
			if st, ok := stampOf(abs); ok {
				before[abs] = st
			}
		}
	}
	return before
}

// check returns an error, wrapping [ErrOutputNotWritten] and naming the
// output, for the first output that the command did not write: a path
// where there is nothing, or a file that is as it was before (before is
// what snapshot returned then), or a pattern that matches nothing the
// command wrote. A folder counts as written if it exists: writing the
// files in it does not change it.
func (o *outputs) check(before map[string]stamp) error {
	if o == nil {
		return nil
	}
	for _, p := range o.List {
		matches := o.Dir.expand(p)
		written := false
		for _, abs := range matches {
			st, ok := stampOf(abs)
			if !ok {
				continue // a dangling symbolic link
			}
			if old, existed := before[abs]; st.dir || !existed || !old.same(st) {
				written = true
				break
			}
		}
		if written {
			continue
		}
		var why string
		switch {
		case len(matches) > 0:
			why = " (it is as it was before the command ran)"
		case isPattern(p):
			why = " (nothing matches the pattern)"
		}
		return fmt.Errorf("output %s: %w%s", o.Dir.showAs(p), ErrOutputNotWritten, why)
	}
	return nil
}

// same reports whether a and b are the stamps of one unchanged file.
func (a stamp) same(b stamp) bool {
	return a.mtime.Equal(b.mtime) && a.size == b.size && a.ino == b.ino && a.dir == b.dir
}

// remove removes every file and folder that the outputs stand for
// (os.RemoveAll: a folder with what it holds; a symbolic link, not what
// it points to), but never a protected path nor a folder above one. It
// returns the errors, each naming its path, joined.
func (o *outputs) remove() error {
	if o == nil {
		return nil
	}
	var errs []error
	for _, p := range o.List {
		for _, abs := range o.Dir.expand(p) {
			if o.protected(abs) {
				continue
			}
			if err := os.RemoveAll(abs); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
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

// RemoveOutputs removes the declared outputs of every job of wf, among
// jobs as [Queue] returned them, that was sent to run and did not end
// Succeeded, once the pool's Run has returned: the files and folders they
// stand for, as a job's worker does when its command fails (see the
// package documentation). It covers the jobs whose worker could not: one
// that died under the job (Aborted), or was killed when the job's command
// outlived its timeout or cancellation by the grace period; for the
// others there is nothing left to remove. opts must be those given to
// Queue. It returns the errors of the removals, each naming its path.
func RemoveOutputs(wf *workflow.Workflow, jobs map[string]*engine.Job[Result], opts Options) error {
	if wf == nil {
		panic("execflow: RemoveOutputs with a nil workflow")
	}
	work, err := filepath.Abs(cmp.Or(opts.Dir, "."))
	if err != nil {
		return fmt.Errorf("execflow: working folder %q: %w", opts.Dir, err)
	}
	m, err := newOutputsMaker(wf, work)
	if err != nil {
		return err
	}
	var errs []error
	for _, j := range wf.Jobs {
		job := jobs[j.ID]
		if job == nil || len(j.Outputs) == 0 {
			continue
		}
		if st := job.Status(); st == engine.Succeeded || st == engine.Skipped || !st.Done() || len(job.Attempts()) == 0 {
			continue
		}
		if err := m.of(j).remove(); err != nil {
			errs = append(errs, fmt.Errorf("job %q (%s:%d): removing its outputs: %w", j.ID, wf.File, j.Line, err))
		}
	}
	return errors.Join(errs...)
}

// finishOutputs is the end of job a's run in its worker: when the command
// exited 0 (runErr is nil), it checks the outputs against before (see
// check); when the run failed, or an output was not written, it removes
// them, so that nothing half-written passes for done, and returns the
// job's error. What cannot be removed is said on standard error.
func finishOutputs(a execArg, before map[string]stamp, runErr error) error {
	o := a.Outputs
	if o == nil {
		return runErr
	}
	if runErr == nil {
		err := o.check(before)
		if err == nil {
			return nil
		}
		runErr = fmt.Errorf("job %q (%s:%d): %w", a.ID, a.File, a.Line, err)
	}
	if err := o.remove(); err != nil {
		fmt.Fprintf(os.Stderr, "poolrun: job %q (%s:%d) failed, and its outputs could not all be removed: %v\n", a.ID, a.File, a.Line, err)
	}
	return runErr
}
