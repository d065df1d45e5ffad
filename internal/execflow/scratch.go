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

// scratchMarker is the file that poolrun writes, with exclusive create, into
// every scratch folder it makes, before anything else goes there. Its text
// (see [markerText]) names the process that made the folder and when that
// process started. [SweepScratch] removes a folder only when it holds this
// marker with the text it expects: a name alone proves nothing, since a
// user's own folder may look like poolrun-2025-results.
const scratchMarker = ".poolrun-scratch"

// markerText is the marker's content for process pid, started at start (in
// clock ticks after boot, as /proc/PID/stat gives it; 0 where unknown).
func markerText(pid int, start uint64) string {
	return fmt.Sprintf("poolrun scratch folder v1\npid %d\nstart %d\n", pid, start)
}

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
		path, err := makeScratchDir(root)
		if err != nil {
			return "", err
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
			os.Remove(filepath.Join(d.path, scratchMarker))
			if err := os.Remove(d.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(os.Stderr, "poolrun: removing scratch folder: %v\n", err)
			}
			delete(s.byRoot, root)
		}
		return
	}
}

// makeScratchDir makes this process's scratch folder under root: a new
// folder (exclusive create, mode 0700) that holds the marker (exclusive
// create, mode 0600). Should writing the marker fail, the folder is removed
// again.
func makeScratchDir(root string) (string, error) {
	pid := os.Getpid()
	path, err := os.MkdirTemp(root, fmt.Sprintf("%s%d-", scratchPrefix, pid))
	if err != nil {
		return "", fmt.Errorf("making a scratch folder: %w", err)
	}
	start, _ := processStart(pid)
	f, err := os.OpenFile(filepath.Join(path, scratchMarker), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		_, err = f.WriteString(markerText(pid, start))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		os.RemoveAll(path)
		return "", fmt.Errorf("making a scratch folder: writing its marker: %w", err)
	}
	return path, nil
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

// SweepScratch removes from root the scratch folders that poolrun made and
// whose process no longer exists: what a worker killed with SIGKILL left
// behind. root "" means [DefaultScratch].
//
// A folder is removed only when all of this holds: its name is
// poolrun-<pid>-<suffix>; it is a real folder (not a symbolic link) of this
// user's with mode 0700; it holds the marker file that poolrun writes into
// every scratch folder it makes, a regular file of this user's whose text
// names the same pid; and no process with that pid runs, or the one that
// runs started at another time than the marker records (its pid was taken
// by a new process). Anything else in root, such as a user's folder named
// poolrun-2025-results, is left alone, whatever its name. A root that does
// not exist holds nothing to sweep. The error joins the failures to read
// root or remove a folder.
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
	var errs []error
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if !stale(dir, e.Name()) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("execflow: sweeping scratch folders: %w", err))
		}
	}
	return errors.Join(errs...)
}

// stale reports whether dir, named name, is a scratch folder that poolrun
// made (see [SweepScratch]) for a process that is gone.
func stale(dir, name string) bool {
	pid, ok := scratchPID(name)
	if !ok {
		return false
	}
	uid := os.Getuid()
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 || !ownedBy(fi, uid) {
		return false
	}
	marker := filepath.Join(dir, scratchMarker)
	mi, err := os.Lstat(marker)
	if err != nil || !mi.Mode().IsRegular() || mi.Size() > 256 || !ownedBy(mi, uid) {
		return false
	}
	data, err := os.ReadFile(marker)
	if err != nil {
		return false
	}
	var mpid int
	var start uint64
	if _, err := fmt.Sscanf(string(data), "poolrun scratch folder v1\npid %d\nstart %d\n", &mpid, &start); err != nil ||
		mpid != pid || string(data) != markerText(mpid, start) {
		return false
	}
	if !processAlive(pid) {
		return true
	}
	// A process with this pid runs: it is the folder's maker unless both
	// start times are known and differ.
	now, ok := processStart(pid)
	return ok && start != 0 && now != start
}

func ownedBy(fi fs.FileInfo, uid int) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid
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

// processStart returns when process pid started, in clock ticks after boot
// (field 22 of /proc/PID/stat); false where that cannot be read.
func processStart(pid int) (uint64, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(string(data[i+1:]))
	// fields[0] is field 3 (the state); field 22 is fields[19].
	if len(fields) < 20 {
		return 0, false
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	return start, err == nil
}
