package execflow_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/proctest"
)

// roleTempDir sets the umask given in EXECFLOW_TEST_UMASK (octal), makes a
// temporary folder named "bench" in EXECFLOW_TEST_SCRATCH with
// execflow.MakeTempDir, prints its path and waits for its stdin to close
// (or to be killed).
func roleTempDir() int {
	mask, err := strconv.ParseUint(os.Getenv("EXECFLOW_TEST_UMASK"), 8, 32)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tempdir: umask:", err)
		return 2
	}
	syscall.Umask(int(mask))
	dir, err := execflow.MakeTempDir(os.Getenv("EXECFLOW_TEST_SCRATCH"), "bench")
	if err != nil {
		fmt.Fprintln(os.Stderr, "tempdir:", err)
		return 1
	}
	fmt.Println(dir)
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// TestTempDirPrivateAndSwept makes a temporary folder, as poolrun bench
// does, in a process with a permissive and with an odd umask: the folder is
// private (mode 0700, its marker 0600 at most) whatever the umask, named
// after its process, left alone by the sweep while its process lives, and
// swept once the process has been killed with SIGKILL.
func TestTempDirPrivateAndSwept(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// 000 lets everything through; 277 takes even the owner's write
	// permission, which a folder made with the umask alone would lack.
	for _, mask := range []string{"000", "022", "277"} {
		t.Run("umask "+mask, func(t *testing.T) {
			root := t.TempDir()
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), envRole+"=tempdir", "EXECFLOW_TEST_SCRATCH="+root, "EXECFLOW_TEST_UMASK="+mask)
			cmd.Stderr = os.Stderr
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			defer cmd.Process.Kill()
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil {
				cmd.Wait()
				t.Fatalf("the child printed no folder: %v", err)
			}
			dir := strings.TrimSpace(line)
			pid := cmd.Process.Pid
			if filepath.Dir(dir) != root || !strings.HasPrefix(filepath.Base(dir), fmt.Sprintf("poolrun-%d-bench-", pid)) {
				t.Errorf("folder %s: want %s/poolrun-%d-bench-<random>", dir, root, pid)
			}
			checkPrivate(t, dir)

			if err := execflow.SweepScratch(root); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(dir); err != nil {
				t.Fatalf("the sweep removed the folder of a live process: %v", err)
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			if proctest.Alive(pid) {
				t.Fatalf("process %d still runs", pid)
			}
			if err := execflow.SweepScratch(root); err != nil {
				t.Fatal(err)
			}
			if left := scratchLeft(t, root); len(left) > 0 {
				t.Errorf("after the sweep the root holds %q", left)
			}
		})
	}
}

// checkPrivate fails unless dir is a real folder of this user's with mode
// 0700 whose every entry (the marker, for a new folder) is a regular file
// that only this user may read.
func checkPrivate(t *testing.T, dir string) {
	t.Helper()
	fi, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: mode %v, want a folder with mode 0700", dir, fi.Mode())
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Getuid() {
		t.Errorf("%s belongs to user %d, not %d", dir, st.Uid, os.Getuid())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Errorf("%s holds no marker", dir)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if !info.Mode().IsRegular() || info.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s in %s: mode %v, want a regular file only its owner may read", e.Name(), dir, info.Mode())
		}
	}
}

// TestScratchFolderPrivate runs a workflow whose item's command reports the
// scratch folder it builds in, in a scratch root that everyone may write
// to (as /dev/shm): the folder is private, and so is the marker.
func TestScratchFolderPrivate(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			root, logDir := t.TempDir(), t.TempDir()
			if err := os.Chmod(root, 0o1777); err != nil {
				t.Fatal(err)
			}
			wf := parse(t, "private.yaml", `
items:
  ref:
    run: |
      dir=$(dirname "$POOLRUN_ITEM")
      stat -c '%a %F' "$dir" > "$LOG/mode"
      for f in "$dir"/.[!.]* "$dir"/*; do [ -e "$f" ] && stat -c '%a %F %n' "$f"; done > "$LOG/entries"
      echo x > "$POOLRUN_ITEM"
jobs:
  - id: use
    needs: [ref]
    run: cat "$POOLRUN_ITEM_REF" > /dev/null
`)
			if _, err := run(t, wf, m.workers, execflow.Options{Scratch: root, Env: []string{"LOG=" + logDir}}); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := strings.TrimSpace(readFile(t, filepath.Join(logDir, "mode"))); got != "700 directory" {
				t.Errorf("the scratch folder: %q, want 700 directory", got)
			}
			entries := strings.Split(strings.TrimSpace(readFile(t, filepath.Join(logDir, "entries"))), "\n")
			if len(entries) != 1 || !strings.HasPrefix(entries[0], "600 regular file ") || !strings.HasSuffix(entries[0], "/.poolrun-scratch") {
				t.Errorf("before the build the scratch folder held %q, want the marker alone, mode 600", entries)
			}
			if left := scratchLeft(t, root); len(left) > 0 {
				t.Errorf("scratch root holds %q after the run", left)
			}
		})
	}
}
