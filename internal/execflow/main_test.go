package execflow_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/workflow"
)

// envRole makes the test binary play a part instead of running the tests.
const envRole = "EXECFLOW_TEST_ROLE"

// The test binary is its own worker: engine.Init serves jobs in a worker
// process and returns at once in the test process.
func TestMain(m *testing.M) {
	engine.Init()
	execflow.Init() // the janitor of a pool that TestJanitor kills
	switch role := os.Getenv(envRole); role {
	case "":
		os.Exit(m.Run())
	case "parent":
		os.Exit(roleParent())
	case "janitored":
		os.Exit(roleJanitored())
	case "tempdir":
		os.Exit(roleTempDir())
	case "program":
		os.Exit(roleProgram())
	default:
		fmt.Fprintln(os.Stderr, "unknown role", role)
		os.Exit(2)
	}
}

// modes are the pool sizes every workflow test runs with.
var modes = []struct {
	name    string
	workers int
}{
	{"serial", 0},
	{"1 worker", 1},
	{"2 workers", 2},
}

// runTimeout bounds a whole pool run in the tests; it is far above what
// any of them needs.
const runTimeout = 2 * time.Minute

// parse parses a workflow written in a test.
func parse(t *testing.T, name, text string) *workflow.Workflow {
	t.Helper()
	wf, err := workflow.Parse(name, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

// run queues wf on a pool of the given size and runs it; it returns the
// jobs and Run's error.
func run(t *testing.T, wf *workflow.Workflow, workers int, opts execflow.Options) (map[string]*engine.Job[execflow.Result], error) {
	t.Helper()
	p := engine.New(engine.Workers(workers))
	jobs, err := execflow.Queue(p, wf, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	err = p.Run(ctx)
	if ctx.Err() != nil {
		t.Fatalf("the pool did not finish in %v: %v", runTimeout, err)
	}
	return jobs, err
}

// scratchLeft returns the names in a scratch root: what the pool left.
func scratchLeft(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// readLog reads a log written by test commands, one "PID PATH" per line.
func readLog(t *testing.T, path string) [][2]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		pid, path, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("%s: bad line %q", filepath.Base(path), line)
		}
		out = append(out, [2]string{pid, path})
	}
	return out
}

// groupMembers returns the processes of process group pgid that are not
// zombies, as "pid (comm) state" (from /proc, Linux only).
func groupMembers(t *testing.T, pgid int) []string {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range dirs {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // gone
		}
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:]) // state ppid pgrp ...
		if len(fields) < 3 {
			continue
		}
		if g, _ := strconv.Atoi(fields[2]); g != pgid || fields[0] == "Z" {
			continue
		}
		out = append(out, strings.TrimSpace(s[:i+1])+" "+fields[0])
	}
	return out
}

// waitGroupGone waits, for a generous while, until process group pgid has
// no live process, and fails the test if it still has one.
func waitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := groupMembers(t, pgid)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("process group %d still has %q", pgid, left)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readPID waits, for a generous while, until path holds a process id.
func readPID(ctx context.Context, path string) (int, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		data, err := os.ReadFile(path)
		if err == nil && strings.HasSuffix(string(data), "\n") {
			return strconv.Atoi(strings.TrimSpace(string(data)))
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s: no process id after a minute", path)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
