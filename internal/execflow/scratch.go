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

// makeScratchDir makes this process's scratch folder under root (see
// [makePrivateDir]).
func makeScratchDir(root string) (string, error) {
	path, err := makePrivateDir(root, "")
	if err != nil {
		return "", fmt.Errorf("making a scratch folder: %w", err)
	}
	return path, nil
}

// makePrivateDir makes a new folder under root named
// poolrun-<pid>-<infix><random>, for this process alone, and writes the
// marker into it, so that [SweepScratch] can prove it made the folder.
//
// The folder is created exclusively under a random name: a name already
// taken, by a symbolic link planted there too, is never used (another is
// tried), so nothing is created through a link and the path cannot be
// predicted. It is then opened without following links and set to mode 0700
// whatever the umask; the marker is created in it, through that descriptor,
// exclusively, with mode 0600 (less what the umask removes). Should any of
// this fail, the folder is removed again.
func makePrivateDir(root, infix string) (string, error) {
	pid := os.Getpid()
	path, err := os.MkdirTemp(root, fmt.Sprintf("%s%d-%s", scratchPrefix, pid, infix))
	if err != nil {
		return "", err
	}
	if err := markPrivateDir(path, pid); err != nil {
		os.RemoveAll(path)
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return path, nil
}

// markPrivateDir makes the folder path, just made by this process, private
// (mode 0700) and writes the marker of process pid into it.
func markPrivateDir(path string, pid int) error {
	dfd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(dfd)
	if err := unix.Fchmod(dfd, 0o700); err != nil {
		return &fs.PathError{Op: "chmod", Path: path, Err: err}
	}
	fd, err := unix.Openat(dfd, scratchMarker, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("writing its marker: %w", &fs.PathError{Op: "create", Path: scratchMarker, Err: err})
	}
	f := os.NewFile(uintptr(fd), filepath.Join(path, scratchMarker))
	start, _ := processStart(pid)
	_, err = f.WriteString(markerText(pid, start))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing its marker: %w", err)
	}
	return nil
}

// MakeTempDir makes a temporary folder for this process under root
// (os.TempDir() when root is ""), named poolrun-<pid>-<name>-<random>, as
// scratch folders are made: created exclusively under a random name (never
// through a symbolic link planted in root), mode 0700, holding poolrun's
// marker. So [SweepScratch] removes it once this process is gone, even if
// the process was killed before it could remove the folder itself, which
// is the caller's job (os.RemoveAll) when it is done with it. name must be
// a non-empty file name without "/"; MakeTempDir panics otherwise.
func MakeTempDir(root, name string) (string, error) {
	if name == "" || strings.ContainsRune(name, '/') || strings.ContainsRune(name, 0) {
		panic(fmt.Sprintf("execflow: MakeTempDir with the name %q", name))
	}
	if root == "" {
		root = os.TempDir()
	}
	path, err := makePrivateDir(root, name+"-")
	if err != nil {
		return "", fmt.Errorf("execflow: making a temporary folder: %w", err)
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
// behind, and the temporary folders ([MakeTempDir]) of a poolrun that was
// killed. root "" means both [DefaultScratch] and os.TempDir().
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
	if root != "" {
		return sweep(root)
	}
	roots := []string{DefaultScratch()}
	if tmp := os.TempDir(); !sameDir(tmp, roots[0]) {
		roots = append(roots, tmp)
	}
	var errs []error
	for _, r := range roots {
		errs = append(errs, sweep(r))
	}
	return errors.Join(errs...)
}

// sameDir reports whether a and b name the same folder.
func sameDir(a, b string) bool {
	if a == b {
		return true
	}
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// sweep is SweepScratch of one root.
func sweep(root string) error {
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
