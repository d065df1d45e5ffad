package main_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A --report that could not be written is refused with exit status 2,
// naming it, before any job runs: the workflow's job, which makes a file,
// has not run, and the report's folder holds nothing new. The cases hold
// as root too (a folder whose mode forbids writing does not stop root: see
// TestReportReadOnlyFolder and TestReportReadOnlyMount).
func TestReportFolderChecked(t *testing.T) {
	dir := t.TempDir()
	side := filepath.Join(dir, "side-effect")
	os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte("jobs:\n  - id: a\n    run: touch '"+side+"'\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "a-file"), nil, 0o644)
	os.Mkdir(filepath.Join(dir, "reports"), 0o755)
	long := filepath.Join(dir, "reports", strings.Repeat("x", 300)+".json")
	for _, tt := range []struct {
		name, report string
		args         []string // the command, before --report
		outs         string   // a folder the command would make, if any
	}{
		{"run, no folder", filepath.Join(dir, "missing", "r.json"), []string{"run", "--quiet"}, ""},
		{"run, a file for a folder", filepath.Join(dir, "a-file", "r.json"), []string{"run", "--quiet"}, ""},
		{"run, a name too long", long, []string{"run", "--quiet"}, ""},
		{"scaffold, a name too long", long, []string{"scaffold", "--quiet", "--scale", "0.05", "--out", "scaffold-out"}, "scaffold-out"},
		{"bench, a name too long", long, []string{"bench", "--quiet", "-j", "1", "--modes", "all", "--scale", "0.05", "--repeat", "1", "--out", "bench-out"}, "bench-out"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append(slices.Clone(tt.args), "--report", tt.report)
			if tt.args[0] == "run" {
				args = append(args, "wf.yaml")
			}
			r := poolrun(t, dir, args...)
			checkReportRefused(t, r, tt.report, side)
			if tt.outs != "" {
				if _, err := os.Stat(filepath.Join(dir, tt.outs)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the output folder %s was made: %v", tt.outs, err)
				}
			}
			if left := entries(t, filepath.Join(dir, "reports")); len(left) > 0 {
				t.Errorf("the report's folder holds %v", left)
			}
		})
	}
	// A folder that can be written: the run and its report, and nothing
	// else in the folder.
	report := filepath.Join(dir, "reports", "r.json")
	if r := poolrun(t, dir, "run", "--quiet", "--report", report, "wf.yaml"); r.code != 0 {
		t.Fatalf("run into a folder that can be written: exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(side); err != nil {
		t.Errorf("the job did not run: %v", err)
	}
	if left := entries(t, filepath.Join(dir, "reports")); !slices.Equal(left, []string{"r.json"}) {
		t.Errorf("the report's folder holds %v, want [r.json]", left)
	}
}

// TestReportReadOnlyFolder: a folder whose mode forbids writing, for a
// user other than root.
func TestReportReadOnlyFolder(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes in a folder of mode 0500")
	}
	dir := t.TempDir()
	side := filepath.Join(dir, "side-effect")
	os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte("jobs:\n  - id: a\n    run: touch '"+side+"'\n"), 0o644)
	ro := filepath.Join(dir, "ro")
	os.Mkdir(ro, 0o500)
	t.Cleanup(func() { os.Chmod(ro, 0o700) })
	report := filepath.Join(ro, "r.json")
	checkReportRefused(t, poolrun(t, dir, "run", "--quiet", "--report", report, "wf.yaml"), report, side)
}

// TestReportReadOnlyMount: a folder on a read-only file system, which
// refuses root too. poolrun runs in a user and mount namespace of its own
// (unshare), in which the folder is a read-only tmpfs; the test is skipped
// where such namespaces cannot be made.
func TestReportReadOnlyMount(t *testing.T) {
	if err := exec.Command("unshare", "--user", "--map-root-user", "--mount", "true").Run(); err != nil {
		t.Skipf("no user and mount namespace: %v", err)
	}
	dir := t.TempDir()
	side := filepath.Join(dir, "side-effect")
	os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte("jobs:\n  - id: a\n    run: touch '"+side+"'\n"), 0o644)
	ro := filepath.Join(dir, "ro")
	os.Mkdir(ro, 0o755)
	report := filepath.Join(ro, "r.json")
	// In the namespace: the folder becomes a read-only tmpfs, then
	// poolrun runs.
	script := `mount -t tmpfs -o ro tmpfs "$1" && shift && exec "$@"`
	r := runCommand(t, dir, "unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh", ro,
		poolrunBin, "run", "--quiet", "--report", report, "wf.yaml")
	checkReportRefused(t, r, report, side)
	if !strings.Contains(r.stderr, "read-only file system") {
		t.Errorf("stderr does not say why: %q", r.stderr)
	}
}

// checkReportRefused checks that r is a refusal of the --report report
// with exit status 2, and that the job that makes side did not run.
func checkReportRefused(t *testing.T, r result, report, side string) {
	t.Helper()
	if r.code != 2 {
		t.Errorf("exit %d, want 2\n%s", r.code, r.stderr)
	}
	if want := "poolrun: --report " + report + ": "; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr does not start its message with %q:\n%s", want, r.stderr)
	}
	if _, err := os.Stat(side); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the job ran before the report's folder was refused: %v", err)
		os.Remove(side)
	}
}

// entries lists the names in folder dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}
