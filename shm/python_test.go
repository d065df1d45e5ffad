package shm_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/poolrun/poolrun/shm"
)

// The Python side of the window: python/poolrun.py reads it for the
// persistent worker programs (docs/WINDOW.md). These tests run it where
// python3 is installed, so that `go test ./...` covers it.

// python3 returns the path of python3, or skips the test when there is
// none, or when it is older than poolrun.py needs.
func python3(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: ", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := exec.CommandContext(ctx, py, "-c", "import sys; sys.exit(sys.version_info < (3, 8))").Run(); err != nil {
		t.Skipf("%s is not Python 3.8 or later: %v", py, err)
	}
	return py
}

// pythonDir returns the absolute path of the repository's python folder.
func pythonDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "python"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// pythonEnv is the environment of the Python processes: poolrun.py on
// the path, and no __pycache__ written into the tree.
func pythonEnv(t *testing.T, extra ...string) []string {
	return append(os.Environ(), append([]string{"PYTHONPATH=" + pythonDir(t), "PYTHONDONTWRITEBYTECODE=1"}, extra...)...)
}

// pySet is set number id of TestPythonReader (testdata/python_reader.py
// computes the same): n keys id<<32 | (i+1)*step for i < n, with n from 1
// to 1000. Each key names its set, so that a reader can tell a whole set
// from a mixture of two.
func pySet(dst []uint64, id uint64) []uint64 {
	n := 1 + id*7919%1000
	step := 1 + id%13
	for i := range n {
		dst = append(dst, id<<32|(i+1)*step)
	}
	return dst
}

// TestPythonReader publishes sets to a window, as fast as a reader can
// follow, while a Python process reads it with poolrun.py and checks
// that every read is one whole published set, or None for an overflowed
// one. Each publish follows the last one at once or after a short pause,
// so that the reads overlap publishes and also find whole sets.
func TestPythonReader(t *testing.T) {
	py := python3(t)
	const (
		minReads = 5000 // the reader reads at least this often
		minSets  = 20   // and sees at least this many sets, unless time runs out
		seconds  = 30   // the reader's own bound
	)
	w := create(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join("testdata", "python_reader.py"),
		fmt.Sprint(minReads), fmt.Sprint(minSets), fmt.Sprint(seconds))
	cmd.Env = pythonEnv(t, "POOLRUN_WINDOW_FD=3")
	cmd.ExtraFiles = []*os.File{w.File()}
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// fail ends the reader, then the test, quoting what the reader said.
	fail := func(format string, args ...any) {
		t.Helper()
		cancel()
		for range lines {
		}
		cmd.Wait()
		t.Fatalf("%s\npython3 stderr:\n%s", fmt.Sprintf(format, args...), stderr.String())
	}
	select {
	case line, ok := <-lines:
		if !ok || line != "ready" {
			fail("the reader said %q before it read, want %q", line, "ready")
		}
	case <-ctx.Done():
		fail("the reader did not start within 60 s")
	}

	pauses := []time.Duration{0, 0, 20 * time.Microsecond, 100 * time.Microsecond}
	var (
		keys      []uint64
		result    string
		published int
		overflows int
	)
	start := time.Now()
publish:
	for i := uint64(1); ; i++ {
		select {
		case line, ok := <-lines:
			if !ok || !strings.HasPrefix(line, "reads=") {
				fail("the reader said %q after %d publishes", line, published)
			}
			result = line
			break publish
		case <-ctx.Done():
			fail("the reader did not finish within 60 s (%d publishes)", published)
		default:
		}
		over := i%97 == 0
		keys = keys[:0]
		if over {
			for k := range uint64(w.Capacity() + 1) {
				keys = append(keys, i<<32|(k+1))
			}
			overflows++
		} else {
			keys = pySet(keys, i)
		}
		if _, err := w.Publish(keys); err != nil && !(over && errors.Is(err, shm.ErrOverflow)) {
			fail("publish %d: %v", i, err)
		}
		published++
		// Pacing, not synchronisation: a reader in Python needs some time
		// between two publishes to read a whole set of 1000 keys.
		time.Sleep(pauses[i%uint64(len(pauses))])
	}
	elapsed := time.Since(start)
	for line := range lines {
		fail("the reader said %q after its result", line)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("python3 %s: %v\nstderr:\n%s", filepath.Join("testdata", "python_reader.py"), err, stderr.String())
	}
	var reads, gens, sets, overflowReads, retries, stalls int
	if _, err := fmt.Sscanf(result, "reads=%d gens=%d sets=%d overflows=%d retries=%d stalls=%d",
		&reads, &gens, &sets, &overflowReads, &retries, &stalls); err != nil {
		t.Fatalf("the reader's result %q: %v", result, err)
	}
	t.Logf("%d publishes (%d overflowed) in %v; python3: %s", published, overflows, elapsed.Round(time.Millisecond), result)
	if reads < minReads {
		t.Errorf("the reader read %d times, want at least %d", reads, minReads)
	}
	if sets < 2 {
		t.Errorf("the reader saw %d different sets, want at least 2: publishing did not go on while it read", sets)
	}
	if stalls != 0 {
		t.Errorf("%d reads found no consistent set within %d s", stalls, seconds)
	}
}

// TestPythonUnittest runs poolrun.py's own tests (python/test_poolrun.py).
func TestPythonUnittest(t *testing.T) {
	py := python3(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "-v")
	cmd.Dir = pythonDir(t)
	cmd.Env = pythonEnv(t)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest in %s: %v\n%s", cmd.Dir, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, line := range lines {
		if strings.HasPrefix(line, "Ran ") {
			t.Log(line)
		}
	}
}
