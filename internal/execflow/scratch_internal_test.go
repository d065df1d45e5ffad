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
