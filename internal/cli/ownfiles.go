package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/poolrun/poolrun/internal/atomicfile"
	"github.com/poolrun/poolrun/internal/regfile"
	"github.com/poolrun/poolrun/internal/workflow"
)

// This file keeps the files that poolrun writes where the user says
// (--report, report -o, --join-file) from replacing anything but a file of
// their own: each is written whole through a rename (package atomicfile),
// which would replace whatever has the name.

// A keptFile is a file that a file poolrun writes must not replace: one
// it reads, or one of its own of another kind.
type keptFile struct {
	what string // what it is, as "the workflow file"
	path string // "": none
}

// workflowFiles are the files of the workflow file at path that nothing
// poolrun writes may replace: the file itself, its state file and its
// lock file.
func workflowFiles(path string) []keptFile {
	return []keptFile{
		{"the workflow file", path},
		{"the state file of " + path, workflow.StateFile(path)},
		{"the lock file of " + path, workflow.LockFile(path)},
	}
}

// checkOwnFile refuses path, which flag names as a file for poolrun to
// write (flag as the message names it: "poolrun: --report"), with exit
// status 2 and a message that says why,
// unless writing it replaces at most a regular file of its own: path
// must name nothing or a regular file (atomicfile.Check: no folder,
// device, named pipe or symbolic link), must not be named as the state or
// lock file of some workflow, and must be none of kept (see samePath, so
// that ./wf.yaml, or a hard link to it, is refused as wf.yaml is).
func checkOwnFile(flag, path string, kept ...keptFile) error {
	if err := atomicfile.Check(path); err != nil {
		var nr *regfile.NotRegularError
		if errors.As(err, &nr) {
			// "PATH: is a device, not a regular file"
			return badInputf("%s %v; poolrun writes over nothing but a regular file", flag, err)
		}
		return badInputf("%s %s: %v", flag, path, err)
	}
	if what := workflowFileOf(path); what != "" {
		return refuseKept(flag, path, what)
	}
	for _, k := range kept {
		if k.path != "" && samePath(path, k.path) {
			what := k.what
			if filepath.Clean(k.path) != filepath.Clean(path) {
				what += " (" + k.path + ")"
			}
			return refuseKept(flag, path, what)
		}
	}
	return nil
}

func refuseKept(flag, path, what string) error {
	return badInputf("%s %s: that is %s, which poolrun must not replace; name another file", flag, path, what)
}

// workflowFileOf says which workflow's state or lock file path is named
// as (workflow.StateFile, workflow.LockFile), as "the state file of
// wf.yaml"; "" for neither.
func workflowFileOf(path string) string {
	name, ok := strings.CutPrefix(filepath.Base(path), ".")
	i := strings.LastIndex(name, ".poolrun-")
	if !ok || i <= 0 {
		return ""
	}
	wf := filepath.Join(filepath.Dir(path), name[:i])
	for _, k := range workflowFiles(wf)[1:] {
		if filepath.Clean(path) == k.path {
			return k.what
		}
	}
	return ""
}

// samePath reports whether a and b name the same file: where both exist,
// the same device and inode (a hard link, a symbolic link, another
// spelling); otherwise the same absolute path once the symbolic links of
// their folders are resolved (a state file yet to be written).
func samePath(a, b string) bool {
	ai, aerr := os.Stat(a)
	bi, berr := os.Stat(b)
	if aerr == nil && berr == nil {
		return os.SameFile(ai, bi)
	}
	ra, rb := resolved(a), resolved(b)
	return ra != "" && ra == rb
}

// resolved is the absolute path of path with the symbolic links of its
// folder resolved; "" if they cannot be.
func resolved(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return ""
	}
	return filepath.Join(dir, filepath.Base(abs))
}

// checkRunFiles refuses a --report or --join-file that is one of the
// files of the workflow file at path (workflowFiles). It must be called
// once the workflow is read, before any job runs.
func (f *poolFlags) checkRunFiles(path string) error {
	kept := workflowFiles(path)
	for _, own := range []struct{ flag, path string }{{"poolrun: --report", f.report}, {"poolrun: --join-file", f.joinFile}} {
		if own.path == "" {
			continue
		}
		if err := checkOwnFile(own.flag, own.path, kept...); err != nil {
			return err
		}
	}
	return nil
}

// checkClaims refuses, before anything runs, a run whose jobs' outputs
// could name one of poolrun's own files, given by their flags: a failed
// job's outputs are removed, and a job's outputs count as made by it.
func checkClaims(wf *workflow.Workflow, own map[string]string) error {
	for _, flag := range []string{"--report", "--join-file"} {
		path := own[flag]
		if path == "" {
			continue
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			continue // refused where it is written
		}
		if j, o := wf.Claims(filepath.Dir(abs), filepath.Base(abs)); j != nil {
			return badInputf("poolrun run: %s %s: %s:%d: job %q: outputs %q can match it: a file of poolrun's is no job's output", flag, path, wf.File, j.Line, j.ID, o)
		}
	}
	return nil
}
