package execflow

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/poolrun/poolrun/internal/workflow"
)

// This file keeps a job's last outputs while it runs again: before its
// command, they are moved aside (a rename in the same folder), so that
// the command starts from nothing, as a first run does; once it
// succeeds they are dropped, and if it fails or is interrupted they are
// put back where they were, as they were.

// asideSuffix ends the name under which an output waits beside itself
// while its job runs: ".NAME.poolrun-aside", NAME the output's own.
const asideSuffix = ".poolrun-aside"

// asideName returns where the output at abs waits while its job runs.
func asideName(abs string) string {
	return filepath.Join(filepath.Dir(abs), "."+filepath.Base(abs)+asideSuffix)
}

// moved is an output that setAside moved out of its command's way.
type moved struct{ path, aside string }

// setAside moves the job's last outputs out of its command's way: each
// output path, and each file the state file records as the job's, that
// exists, unless the job reads it too (an input: Keep) or it is
// protected. An aside left by a run that was cut off is put back first
// (what stands in its place is what that run half wrote). It then makes
// the folders the outputs lie in. A move that fails puts back what was
// moved and is the error; the command does not run.
func (o *outputs) setAside() ([]moved, error) {
	if o == nil {
		return nil, nil
	}
	var done []moved
	fail := func(err error) ([]moved, error) {
		o.putBack(done)
		return nil, err
	}
	for _, abs := range o.last() {
		aside := asideName(abs)
		if _, err := os.Lstat(aside); err == nil {
			// A run was cut off with this output aside.
			if err := os.RemoveAll(abs); err != nil {
				return fail(err)
			}
			if err := os.Rename(aside, abs); err != nil {
				return fail(err)
			}
		}
		if _, err := os.Lstat(abs); err != nil {
			continue
		}
		if err := o.inside(abs); err != nil {
			return fail(fmt.Errorf("output %s: %w", abs, err))
		}
		if err := os.Rename(abs, aside); err != nil {
			return fail(fmt.Errorf("moving the last output aside: %w", err))
		}
		done = append(done, moved{abs, aside})
	}
	for _, dir := range o.folders() {
		if err := o.inside(filepath.Join(dir, "x")); err != nil {
			continue // checked after the command, with the outputs
		}
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return fail(fmt.Errorf("making the folder of an output: %w", err))
		}
	}
	return done, nil
}

// last returns the job's last outputs that setAside moves: its output
// paths and the files recorded as its own (cut-off asides count, found
// by their names), less those it reads and the protected ones.
func (o *outputs) last() []string {
	var out []string
	add := func(abs string) {
		if o.protected(abs) || o.keeps(abs) {
			return
		}
		out = append(out, abs)
	}
	for _, p := range o.List {
		if !workflow.IsPattern(p) {
			add(o.Dir.path(p))
		}
	}
	for _, abs := range o.Made {
		add(abs)
	}
	return out
}

// keeps reports whether the job reads abs too: it is not moved aside.
func (o *outputs) keeps(abs string) bool {
	for _, k := range o.Keep {
		if k == abs {
			return true
		}
	}
	return false
}

// folders returns the folders the outputs lie in: an output path's
// folder, and a pattern's up to its first part with a pattern
// character; the working folder itself is not one of them.
func (o *outputs) folders() []string {
	var dirs []string
	for _, p := range o.List {
		abs := o.Dir.path(p)
		if workflow.IsPattern(p) {
			rel, err := filepath.Rel(o.Dir.Abs, abs)
			if err != nil || filepath.IsAbs(p) {
				continue
			}
			parts := strings.Split(rel, string(filepath.Separator))
			n := len(parts) - 1
			for i, part := range parts[:n] {
				if workflow.IsPattern(part) {
					n = i
					break
				}
			}
			abs = filepath.Join(append([]string{o.Dir.Abs}, parts[:n]...)...)
		} else {
			abs = filepath.Dir(abs)
		}
		if abs != o.Dir.Abs && strings.HasPrefix(abs, o.Dir.Abs+string(filepath.Separator)) {
			dirs = append(dirs, abs)
		}
	}
	return dirs
}

// putBack puts back what setAside moved, where the command left nothing
// in its place (remove has removed what it wrote); what it cannot put
// back stays aside, and the error says where.
func (o *outputs) putBack(aside []moved) error {
	var errs []error
	for _, m := range aside {
		if _, err := os.Lstat(m.path); err == nil {
			errs = append(errs, fmt.Errorf("%s: kept as %s: something is in its place", m.path, m.aside))
			continue
		}
		if err := os.Rename(m.aside, m.path); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// drop removes what setAside moved, once the command has made the
// outputs anew, and stamps each output path that is a folder with the
// time now, so that a folder remade in place counts as new.
func (o *outputs) drop(aside []moved) error {
	var errs []error
	for _, m := range aside {
		if err := os.RemoveAll(m.aside); err != nil {
			errs = append(errs, err)
		}
	}
	now := time.Now()
	for _, p := range o.List {
		if workflow.IsPattern(p) {
			continue
		}
		abs := o.Dir.path(p)
		if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
			if err := os.Chtimes(abs, now, now); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
