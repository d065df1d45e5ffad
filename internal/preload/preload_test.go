package preload_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/preload"
	_ "github.com/poolrun/poolrun/internal/prestart" // as in cmd/poolrun: a run of many commands starts again
	"github.com/poolrun/poolrun/internal/workflow"
)

// roleEnv makes the test binary, re-executed with the arguments of
// poolrun run, say what this package did at its start instead of running
// the tests: whether it began to read a file, and whether Load then gave
// what workflow.Load gives.
const roleEnv = "PRELOAD_TEST_ROLE"

func TestMain(m *testing.M) {
	if _, ok := os.LookupEnv(roleEnv); ok {
		os.Exit(role())
	}
	os.Exit(m.Run())
}

func role() int {
	path, began := preload.Preloaded()
	file := os.Args[len(os.Args)-1]
	got, gotErr := preload.Load(file)
	fmt.Printf("preloaded %v %q\n", began, path)
	if fi, err := os.Stat(file); err != nil || !fi.Mode().IsRegular() {
		// A FIFO: refused, not waited for.
		if gotErr != nil {
			fmt.Println(gotErr)
		} else {
			fmt.Printf("read %d jobs\n", len(got.Jobs))
		}
		return 0
	}
	want, wantErr := workflow.Load(file)
	switch {
	case (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error():
		fmt.Printf("error %v, want %v\n", gotErr, wantErr)
	case gotErr == nil && fmt.Sprint(jobIDs(got)) != fmt.Sprint(jobIDs(want)):
		fmt.Printf("jobs %v, want %v\n", jobIDs(got), jobIDs(want))
	default:
		fmt.Println("same as workflow.Load")
	}
	if _, again := preload.Preloaded(); again {
		fmt.Println("still preloaded after Load")
	}
	return 0
}

func jobIDs(wf *workflow.Workflow) []string {
	var ids []string
	for _, j := range wf.Jobs {
		ids = append(ids, j.ID)
	}
	return ids
}

// selfTimeout bounds a run of the test binary: one that waits (for a
// FIFO's writer, say) fails its test instead of hanging.
const selfTimeout = time.Minute

// self runs the test binary as "BIN args..." with the extra environment
// env, and returns what it printed.
func self(t *testing.T, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), selfTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), roleEnv+"=1"), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			t.Fatalf("%v: did not end within %v\n%s", args, selfTimeout, out.String())
		}
		t.Fatalf("%v: %v\n%s", args, err, out.String())
	}
	return out.String()
}

// TestPreload: a poolrun run of a regular file with many jobs, which
// package prestart re-executes with a larger timer slack, reads the file
// at its start, and Load gives it once, as workflow.Load would have,
// mistakes included; so does any re-executed run (its mark set, as
// poolrun run sets it). Anything else reads nothing at its start; a FIFO
// is then refused by Load at once.
func TestPreload(t *testing.T) {
	dir := t.TempDir()
	jobs := func(n int) string {
		var b strings.Builder
		b.WriteString("jobs:\n")
		for i := range n {
			fmt.Fprintf(&b, "  - {id: j%d, run: \"true\"}\n", i)
		}
		return b.String()
	}
	write := func(name, data string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	many := write("many.yaml", jobs(300))
	few := write("few.yaml", jobs(10))
	bad := write("bad.yaml", jobs(250)+"  - {id: j1, run: again}\n")
	// A FIFO that no writer opens: refused at once.
	fifo := filepath.Join(dir, "wf.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	const slack = "POOLRUN_TIMER_SLACK=50000"
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string // the first line
		then string // the second line
	}{
		{"many jobs", nil, []string{"run", "-j", "2", many}, fmt.Sprintf("preloaded true %q", many), ""},
		{"many jobs, a mistake", nil, []string{"run", bad}, fmt.Sprintf("preloaded true %q", bad), ""},
		{"few jobs", nil, []string{"run", few}, `preloaded false ""`, ""},
		{"few jobs, re-executed", []string{slack}, []string{"run", few}, fmt.Sprintf("preloaded true %q", few), ""},
		{"a worker", []string{slack, "POOLRUN_WORKER=1"}, []string{"run", few}, `preloaded false ""`, ""},
		{"a janitor", []string{slack, "POOLRUN_JANITOR=1:/tmp"}, []string{"run", few}, `preloaded false ""`, ""},
		{"another command", []string{slack}, []string{"scaffold", few}, `preloaded false ""`, ""},
		{"a FIFO", []string{slack}, []string{"run", fifo}, `preloaded false ""`, fifo + ": is a named pipe (FIFO), not a regular file; write the workflow to a file first, and give that file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := self(t, c.env, c.args...)
			if !strings.HasPrefix(out, c.want+"\n") {
				t.Errorf("got:\n%s\nwant a first line %s", out, c.want)
			}
			then := c.then
			if then == "" {
				then = "same as workflow.Load"
			}
			if !strings.Contains(out, "\n"+then+"\n") || strings.Contains(out, "still preloaded") {
				t.Errorf("got:\n%s\nwant a line %q, and nothing left preloaded", out, then)
			}
		})
	}
}

// TestLoadOtherPath: Load of a path other than the one read at the start
// reads that path.
func TestLoadOtherPath(t *testing.T) {
	_, err := preload.Load(filepath.Join(t.TempDir(), "missing.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want a not-exist error", err)
	}
}
