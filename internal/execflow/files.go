package execflow

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/poolrun/poolrun/internal/workflow"
)

// This file finds the files a job's inputs and outputs stand for: paths
// and patterns relative to the workflow's working folder.

// folder is the working folder of a workflow (workflow.Workflow.Dir),
// against which its jobs' inputs and outputs are read. (Its fields are exported for gob: a job's
// argument carries it to the worker.)
type folder struct {
	Abs   string // absolute
	Shown string // as the workflow file's name gives it, for messages: "." for "wf.yaml"
}

// folderOf returns the folder against which the inputs and outputs of
// wf's jobs are read: wf.Dir, its working folder, or, when wf has none
// (a Workflow made by hand), the folder of wf.File made absolute against
// the current folder. It is shown in messages as wf.File's folder is when
// it is that folder, else relative to the current folder when it lies
// below it, else absolute.
func folderOf(wf *workflow.Workflow) (folder, error) {
	shown := filepath.Dir(wf.File)
	abs, err := filepath.Abs(shown)
	if err != nil {
		return folder{}, fmt.Errorf("execflow: folder of %s: %w", wf.File, err)
	}
	if wf.Dir == "" || wf.Dir == abs {
		return folder{Abs: abs, Shown: shown}, nil
	}
	abs = filepath.Clean(wf.Dir)
	shown = abs
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			shown = rel
		}
	}
	return folder{Abs: abs, Shown: shown}, nil
}

// path returns the absolute path that p, an input or output as written,
// stands for.
func (f folder) path(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(f.Abs, p)
}

// pattern returns the absolute pattern that the pattern p stands for: the
// folder's name escaped, should it hold *, ?, [ or \.
func (f folder) pattern(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return workflow.EscapePattern(f.Abs) + string(filepath.Separator) + p
}

// showMatch returns abs, a file that p (an input or output as written)
// stands for, as messages name it: as p is, when p is a path; relative to
// the folder as given, when p is a relative pattern; else absolute.
func (f folder) showMatch(p, abs string) string {
	if !workflow.IsPattern(p) {
		return f.showAs(p)
	}
	if filepath.IsAbs(p) {
		return abs
	}
	rel, err := filepath.Rel(f.Abs, abs)
	if err != nil {
		return abs
	}
	return filepath.Join(f.Shown, rel)
}

// showAs returns p, an input or output as written, as messages name it.
func (f folder) showAs(p string) string {
	if filepath.IsAbs(p) || f.Shown == "." && p == filepath.Clean(p) {
		return p // as written: no copy of its own
	}
	return filepath.Join(f.Shown, p)
}

// expand returns the absolute paths of the files and folders that exist
// and that p, an input or output as written, stands for: p itself, or what
// the pattern p matches, in lexical order (a name that begins with a dot
// only where the pattern's part begins with one: [workflow.Glob]).
func (f folder) expand(p string) []string {
	if !workflow.IsPattern(p) {
		abs := f.path(p)
		if _, err := os.Lstat(abs); err != nil {
			return nil
		}
		return []string{abs}
	}
	return workflow.Glob(f.pattern(p))
}

// stamp is what identifies the content of a file as its command left it:
// a write changes its modification time or, through a rename, its inode.
type stamp struct {
	mtime time.Time
	size  int64
	ino   uint64
	dir   bool
}

// stampOf returns the stamp of the file or folder at abs, following
// symbolic links; false if there is none.
func stampOf(abs string) (stamp, bool) {
	fi, err := os.Stat(abs)
	if err != nil {
		return stamp{}, false
	}
	return stamp{mtime: fi.ModTime(), size: fi.Size(), ino: inode(fi), dir: fi.IsDir()}, true
}

// inode returns the inode number of fi, 0 where it is unknown.
func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
