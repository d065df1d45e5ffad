package execflow

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// TestSweepOnlyWhatPoolrunMade is the data-loss bug of issue 11: a folder
// is swept only when poolrun can prove it made it, never by its name alone.
func TestSweepOnlyWhatPoolrunMade(t *testing.T) {
	root := t.TempDir()
	dead := deadPID(t)
	self := os.Getpid()
	selfStart, ok := processStart(self)
	if !ok {
		t.Skip("no /proc/PID/stat")
	}
	// folder makes root/name with mode 0700 and, unless marker is "", a
	// marker file with that text.
	folder := func(name, marker string) string {
		t.Helper()
		dir := filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if marker != "" {
			if err := os.WriteFile(filepath.Join(dir, scratchMarker), []byte(marker), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "1-ref"), []byte("artefact"), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	d := strconv.Itoa(dead)
	s := strconv.Itoa(self)

	// What must stay.
	users := filepath.Join(root, "poolrun-2025-results")
	if err := os.Mkdir(users, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(users, "data.csv"), []byte("x\n"), 0o644)
	folder("poolrun-"+d+"-nomarker", "")
	folder("poolrun-"+d+"-otherpid", markerText(dead+1, 0))
	folder("poolrun-"+d+"-badtext", "poolrun scratch folder v1\npid "+d+"\nstart 0\nextra\n")
	folder("poolrun-"+s+"-live", markerText(self, selfStart))
	open := folder("poolrun-"+d+"-open", markerText(dead, 0))
	os.Chmod(open, 0o755)
	linked := folder("poolrun-"+d+"-linkedmarker", "")
	target := filepath.Join(t.TempDir(), "marker")
	os.WriteFile(target, []byte(markerText(dead, 0)), 0o600)
	if err := os.Symlink(target, filepath.Join(linked, scratchMarker)); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	os.Chmod(elsewhere, 0o700)
	os.WriteFile(filepath.Join(elsewhere, scratchMarker), []byte(markerText(dead, 0)), 0o600)
	os.WriteFile(filepath.Join(elsewhere, "keep"), []byte("x"), 0o600)
	if err := os.Symlink(elsewhere, filepath.Join(root, "poolrun-"+d+"-symlink")); err != nil {
		t.Fatal(err)
	}

	// What must go: a dead process's folder, and a folder whose pid now
	// belongs to a process that started at another time.
	folder("poolrun-"+d+"-dead", markerText(dead, 0))
	folder("poolrun-"+s+"-reused", markerText(self, selfStart+1))

	if err := SweepScratch(root); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := []string{
		"poolrun-" + d + "-badtext", "poolrun-" + d + "-linkedmarker", "poolrun-" + d + "-nomarker",
		"poolrun-" + d + "-open", "poolrun-" + d + "-otherpid", "poolrun-" + d + "-symlink",
		"poolrun-2025-results", "poolrun-" + s + "-live",
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("after the sweep the root holds\n%q\nwant\n%q", got, want)
	}
	if data, err := os.ReadFile(filepath.Join(users, "data.csv")); err != nil || string(data) != "x\n" {
		t.Errorf("the user's file: %q, %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "keep")); err != nil {
		t.Errorf("the sweep followed a symbolic link: %v", err)
	}
}

// TestScratchFolderMarked: the folders poolrun makes carry the marker, are
// private, and go with their last artefact.
func TestScratchFolderMarked(t *testing.T) {
	root := t.TempDir()
	path, err := scratch.reserve(root, "ref")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(path)
	fi, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("scratch folder mode %v, want 0700", fi.Mode().Perm())
	}
	data, err := os.ReadFile(filepath.Join(dir, scratchMarker))
	if err != nil {
		t.Fatal(err)
	}
	start, _ := processStart(os.Getpid())
	if string(data) != markerText(os.Getpid(), start) {
		t.Errorf("marker %q", data)
	}
	if stale(dir, filepath.Base(dir)) {
		t.Error("this live process's folder counts as stale")
	}
	scratch.release(path)
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("the folder is still there after its last release: %v", err)
	}
}

// deadPID returns the pid of a process that has ended.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestPrivateDirRefusesLinks: a symbolic link where a scratch folder is
// being made is not followed (the folder is opened without following
// links), and a name taken, by a link or a user's own folder, is never
// used: another random name is.
func TestPrivateDirRefusesLinks(t *testing.T) {
	root, elsewhere := t.TempDir(), t.TempDir()
	link := filepath.Join(root, "poolrun-"+strconv.Itoa(os.Getpid())+"-planted")
	if err := os.Symlink(elsewhere, link); err != nil {
		t.Fatal(err)
	}
	if err := markPrivateDir(link, os.Getpid()); err == nil {
		t.Error("markPrivateDir followed a symbolic link")
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) > 0 {
		t.Errorf("the link's target got %v", entries)
	}

	// Every name made is new: made by this call, a real folder.
	for range 20 {
		dir, err := makePrivateDir(root, "planted")
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v, %v", dir, fi, err)
		}
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the planted link: %v, %v", fi, err)
	}
}

// TestRemoveScratchOf: the removal of a dead worker's scratch folders asks
// for the proofs of the sweep: folders of other processes, folders without
// the marker and links stay.
func TestRemoveScratchOf(t *testing.T) {
	root := t.TempDir()
	dead, other := deadPID(t), deadPID(t)
	d, o := strconv.Itoa(dead), strconv.Itoa(other)
	mk := func(name, marker string) {
		t.Helper()
		dir := filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if marker != "" {
			if err := os.WriteFile(filepath.Join(dir, scratchMarker), []byte(marker), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("poolrun-"+d+"-a", markerText(dead, 0))
	mk("poolrun-"+d+"-b", markerText(dead, 0))
	mk("poolrun-"+d+"-nomarker", "")
	mk("poolrun-"+d+"-othermarker", markerText(other, 0))
	mk("poolrun-"+o+"-other", markerText(other, 0))
	elsewhere := t.TempDir()
	os.Chmod(elsewhere, 0o700)
	os.WriteFile(filepath.Join(elsewhere, scratchMarker), []byte(markerText(dead, 0)), 0o600)
	if err := os.Symlink(elsewhere, filepath.Join(root, "poolrun-"+d+"-link")); err != nil {
		t.Fatal(err)
	}

	if err := removeScratchOf(root, dead); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := []string{"poolrun-" + d + "-link", "poolrun-" + d + "-nomarker", "poolrun-" + d + "-othermarker", "poolrun-" + o + "-other"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("after the removal the root holds\n%q\nwant\n%q", got, want)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, scratchMarker)); err != nil {
		t.Errorf("the removal followed a link: %v", err)
	}
}
