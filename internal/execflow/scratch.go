package execflow

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// scratchPrefix begins the name of every scratch folder:
// poolrun-<pid>-<random>.
const scratchPrefix = "poolrun-"

// scratchDirs are this process's scratch folders, one per scratch root at a
// time. A folder lives while it holds an artefact or a build in progress:
// the release of the last one removes it, and the next reserve makes a new
// one. This is the package's only mutable state besides its registrations;
// it belongs to the process, as the folders do.
type scratchDirs struct {
	mu     sync.Mutex
	byRoot map[string]*scratchDir
	seq    uint64 // numbers the artefacts of this process
}

type scratchDir struct {
	path string
	live int // artefacts in it, built or being built
}

var scratch = &scratchDirs{byRoot: map[string]*scratchDir{}}

// reserve returns a path that does not exist yet, in this process's scratch
// folder under root, making the folder if needed. Every reserve must be
// matched by a release of the path.
func (s *scratchDirs) reserve(root, name string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.byRoot[root]
	if d == nil {
		path, err := os.MkdirTemp(root, fmt.Sprintf("%s%d-", scratchPrefix, os.Getpid()))
		if err != nil {
			return "", fmt.Errorf("making a scratch folder: %w", err)
		}
		d = &scratchDir{path: path}
		s.byRoot[root] = d
	}
	d.live++
	s.seq++
	return filepath.Join(d.path, strconv.FormatUint(s.seq, 10)+"-"+name), nil
}

// release gives back the place of path, whose artefact is gone; the folder
// is removed when it was the last one.
func (s *scratchDirs) release(path string) {
	dir := filepath.Dir(path)
	s.mu.Lock()
	defer s.mu.Unlock()
	for root, d := range s.byRoot {
		if d.path != dir {
			continue
		}
		if d.live--; d.live == 0 {
			if err := os.Remove(d.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(os.Stderr, "poolrun: removing scratch folder: %v\n", err)
			}
			delete(s.byRoot, root)
		}
		return
	}
}

// DefaultScratch returns the scratch root used when [Options.Scratch] is
// "": os.TempDir() when it is on a memory file system (tmpfs), else /dev/shm
// when it is a folder this process may write to, else os.TempDir().
func DefaultScratch() string {
	tmp := os.TempDir()
	if onMemoryFS(tmp) && writable(tmp) {
		return tmp
	}
	const shm = "/dev/shm"
	if fi, err := os.Stat(shm); err == nil && fi.IsDir() && writable(shm) {
		return shm
	}
	return tmp
}

func writable(dir string) bool {
	return unix.Access(dir, unix.W_OK|unix.X_OK) == nil
}

// SweepScratch removes from root the scratch folders (poolrun-<pid>-*) that
// belong to this user and whose process no longer exists: what a worker
// killed with SIGKILL left behind. root "" means [DefaultScratch]. Folders
// of live processes, of other users, and anything else in root are left
// alone; a folder whose process id was taken by a new process stays until
// that one is gone. A root that does not exist holds nothing to sweep. The
// error joins the failures to read root or remove a folder.
func SweepScratch(root string) error {
	if root == "" {
		root = DefaultScratch()
	}
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("execflow: sweeping scratch folders: %w", err)
	}
	uid := os.Getuid()
	var errs []error
	for _, e := range entries {
		pid, ok := scratchPID(e.Name())
		if !ok || !e.IsDir() || processAlive(pid) {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // gone meanwhile
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != uid {
			continue
		}
		if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
			errs = append(errs, fmt.Errorf("execflow: sweeping scratch folders: %w", err))
		}
	}
	return errors.Join(errs...)
}

// scratchPID returns the process id in the name of a scratch folder.
func scratchPID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, scratchPrefix)
	if !ok {
		return 0, false
	}
	digits, suffix, ok := strings.Cut(rest, "-")
	if !ok || suffix == "" || digits == "" || digits[0] == '0' {
		return 0, false
	}
	pid, err := strconv.Atoi(digits)
	if err != nil || pid <= 0 || strconv.Itoa(pid) != digits {
		return 0, false
	}
	return pid, true
}

// processAlive reports whether a process with id pid exists (EPERM: it
// exists, and belongs to someone else).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
