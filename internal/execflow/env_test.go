package execflow_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/proctest"
)

func itoa(n int) string { return strconv.Itoa(n) }

// TestEnv checks what a job's command finds: its id in POOLRUN_JOB, the
// path of each item it needs in POOLRUN_ITEM_<NAME>, the extra environment,
// poolrun's environment without its POOLRUN_* variables (the engine's worker
// marker, and the job id and item paths of an outer poolrun that started
// this one), the owner mark (the chain that this process inherited from
// an outer run, then the tags of the pool's process and of the worker:
// each its pid and start time), its working folder, and no descriptor but
// 0, 1 and 2 (and those this test process inherited from outside without
// close-on-exec): in particular none of the worker's protocol
// descriptors. The item's command likewise.
func TestEnv(t *testing.T) {
	t.Setenv("EXECFLOW_TEST_INHERITED", "yes")
	// As an outer poolrun's command would have them.
	t.Setenv("POOLRUN_JOB", "outer")
	t.Setenv("POOLRUN_ITEM", "/outer/item")
	t.Setenv("POOLRUN_ITEM_OUTER", "/outer/ref")
	t.Setenv("POOLRUN_SOMETHING", "else")
	t.Setenv("POOLRUN_THREADS", "99")
	t.Setenv("POOLRUN_ATTEMPT", "7")
	t.Setenv("POOLRUN_RES_TAPE", "9")
	outer := "1.100:2.200 3.300:3.300" // an outer run nested in another
	t.Setenv(execflow.OwnerEnv, outer)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			// A command's descriptors are listed first, before its shell
			// opens any of its own, by an inner shell that the command's
			// shell starts without a redirection (dash makes a command's
			// redirections in the shell itself and keeps the originals at
			// 10 and up while the command runs): the inner shell lists
			// /proc/$PPID/fd, the command's shell's, with ls, whose
			// descriptors (the folder it reads, the file it writes) are its
			// own.
			wf := parse(t, "env.yaml", `
items:
  ref-2:
    run: |
      sh -c 'ls -l /proc/$PPID/fd > "$LOG/item-fds"'
      env > "$POOLRUN_ITEM"
jobs:
  - id: show
    needs: [ref-2]
    threads: 3
    resources: {gpu: 2, licence: 0}
    run: |
      sh -c 'ls -l /proc/$PPID/fd > "$LOG/fds"'
      ls -l /proc/$PPID/fd > "$LOG/parent-fds"
      echo $PPID > "$LOG/parent"
      cat /proc/$PPID/stat > "$LOG/parent-stat"
      env > "$LOG/env"
      pwd -P > "$LOG/pwd"
      cp "$POOLRUN_ITEM_REF_2" "$LOG/item-env"
`)
			logDir, root, dir := t.TempDir(), t.TempDir(), t.TempDir()
			jobs, err := run(t, wf, m.workers, execflow.Options{
				Dir: dir, Scratch: root, Env: []string{"LOG=" + logDir, "EXTRA=a=b", "EXECFLOW_TEST_INHERITED=overridden", "POOLRUN_THREADS=5", "POOLRUN_RES_GPU=5"},
			})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if _, err := jobs["show"].Result(); err != nil {
				t.Fatal(err)
			}
			env := readEnv(t, filepath.Join(logDir, "env"))
			if got := env["POOLRUN_JOB"]; got != "show" {
				t.Errorf("POOLRUN_JOB=%q, want show", got)
			}
			// The job's threads, attempt and resources, whatever the
			// environment and Options.Env said.
			for k, want := range map[string]string{"POOLRUN_THREADS": "3", "POOLRUN_ATTEMPT": "1", "POOLRUN_RES_GPU": "2", "POOLRUN_RES_LICENCE": "0"} {
				if got := env[k]; got != want {
					t.Errorf("%s=%q, want %q", k, got, want)
				}
			}
			item := env["POOLRUN_ITEM_REF_2"]
			if rel, err := filepath.Rel(root, item); err != nil || !strings.HasPrefix(rel, "poolrun-") || strings.Count(rel, "/") != 1 {
				t.Errorf("POOLRUN_ITEM_REF_2=%q, not in a scratch folder of %s", item, root)
			}
			if got := env["EXTRA"]; got != "a=b" {
				t.Errorf("EXTRA=%q, want a=b", got)
			}
			if got := env["EXECFLOW_TEST_INHERITED"]; got != "overridden" {
				t.Errorf("EXECFLOW_TEST_INHERITED=%q, want the Options' value", got)
			}
			if _, ok := env["HOME"]; !ok && os.Getenv("HOME") != "" {
				t.Error("HOME is not inherited")
			}
			if v, ok := env[engine.WorkerEnv]; ok {
				t.Errorf("the worker marker reached the command: %s=%q", engine.WorkerEnv, v)
			}
			if v, ok := env["POOLRUN_RES_TAPE"]; ok {
				t.Errorf("the command inherited POOLRUN_RES_TAPE=%q", v)
			}
			for k, v := range env {
				if strings.HasPrefix(k, execflow.EnvPrefix) && k != "POOLRUN_JOB" && k != "POOLRUN_ITEM_REF_2" && k != execflow.OwnerEnv &&
					k != "POOLRUN_THREADS" && k != "POOLRUN_ATTEMPT" && !strings.HasPrefix(k, "POOLRUN_RES_") {
					t.Errorf("the command inherited %s=%q", k, v)
				}
			}
			// The mark: the outer run's, then the tags of this process
			// (the pool's) and of the worker, the command's parent, and
			// the command's number in the worker.
			self, err := os.ReadFile("/proc/self/stat")
			if err != nil {
				t.Fatal(err)
			}
			worker := strings.TrimSpace(readFile(t, filepath.Join(logDir, "parent")))
			want := outer + " " + tag(t, strconv.Itoa(os.Getpid()), string(self)) + ":" +
				tag(t, worker, readFile(t, filepath.Join(logDir, "parent-stat")))
			number := func(mark string) uint64 {
				t.Helper()
				n, err := strconv.ParseUint(strings.TrimPrefix(mark, want+":"), 10, 64)
				if !strings.HasPrefix(mark, want+":") || err != nil {
					t.Errorf("a command is marked %s=%q, want %q and a number", execflow.OwnerEnv, mark, want+":")
				}
				return n
			}
			jobNumber := number(env[execflow.OwnerEnv])
			wantDir, _ := filepath.EvalSymlinks(dir)
			if got := strings.TrimSpace(readFile(t, filepath.Join(logDir, "pwd"))); got != wantDir {
				t.Errorf("working folder %q, want %q", got, wantDir)
			}

			itemEnv := readEnv(t, filepath.Join(logDir, "item-env"))
			if itemEnv["POOLRUN_ITEM"] != item {
				t.Errorf("the item's command had POOLRUN_ITEM=%q, the job got %q", itemEnv["POOLRUN_ITEM"], item)
			}
			if v, ok := itemEnv["POOLRUN_JOB"]; ok {
				t.Errorf("the item's command had POOLRUN_JOB=%q", v)
			}
			if itemEnv["EXTRA"] != "a=b" {
				t.Errorf("the item's command had EXTRA=%q", itemEnv["EXTRA"])
			}
			if _, ok := itemEnv[engine.WorkerEnv]; ok {
				t.Error("the worker marker reached the item's command")
			}
			if number(itemEnv[execflow.OwnerEnv]) == jobNumber {
				t.Errorf("the item's command is marked %q, the job's %q: the same number", itemEnv[execflow.OwnerEnv], env[execflow.OwnerEnv])
			}
			for k, v := range itemEnv {
				if strings.HasPrefix(k, execflow.EnvPrefix) && k != "POOLRUN_ITEM" && k != execflow.OwnerEnv {
					t.Errorf("the item's command inherited %s=%q", k, v)
				}
			}

			// Descriptors that this process inherited without close-on-exec
			// (from whatever started go test) pass to every child, the
			// worker first: they are the environment's, and the commands
			// may hold them. Any other descriptor above 2 is a leak.
			outside, err := proctest.InheritedFDs()
			if err != nil {
				t.Fatal(err)
			}
			leaked := func(fds map[int]string) map[int]string {
				out := map[int]string{}
				for fd, target := range fds {
					if fd > 2 && outside[fd] != target {
						out[fd] = target
					}
				}
				return out
			}
			if m.workers > 0 {
				// The commands ran in a worker, which holds descriptors of
				// its own (the protocol's pipes): there is something not to
				// inherit.
				parent := strings.TrimSpace(readFile(t, filepath.Join(logDir, "parent")))
				if parent == strconv.Itoa(os.Getpid()) {
					t.Fatalf("the command's parent is the test process, not a worker")
				}
				if own := leaked(readFDs(t, filepath.Join(logDir, "parent-fds"))); len(own) == 0 {
					t.Errorf("worker %s holds no descriptor of its own above 2: the test proves nothing", parent)
				}
			}
			for _, f := range []struct{ who, file string }{
				{"the job's command", "fds"}, {"the item's command", "item-fds"},
			} {
				fds := readFDs(t, filepath.Join(logDir, f.file))
				for fd, target := range leaked(fds) {
					t.Errorf("%s inherited descriptor %d (%s) from the process that ran it", f.who, fd, target)
				}
				for _, fd := range []int{0, 1, 2} {
					if _, ok := fds[fd]; !ok {
						t.Errorf("%s has no descriptor %d", f.who, fd)
					}
				}
			}
		})
	}
}

// tag returns the tag of process pid in an owner mark, "PID.START", from
// its /proc/PID/stat: START is the stat line's field 22, counted after the
// command name in parentheses.
func tag(t *testing.T, pid, stat string) string {
	t.Helper()
	f := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
	if len(f) < 20 || !strings.HasPrefix(stat, pid+" (") {
		t.Fatalf("process %s: stat %q", pid, stat)
	}
	return pid + "." + f[19]
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// readFDs reads the output of ls -l /proc/PID/fd: the target of each
// descriptor, by number.
func readFDs(t *testing.T, path string) map[int]string {
	t.Helper()
	fds := map[int]string{}
	for _, line := range strings.Split(readFile(t, path), "\n") {
		link, target, ok := strings.Cut(line, " -> ")
		if !ok {
			continue // "total 0", the final empty line
		}
		f := strings.Fields(link)
		fd, err := strconv.Atoi(f[len(f)-1])
		if err != nil {
			t.Fatalf("%s: bad line %q", filepath.Base(path), line)
		}
		fds[fd] = target
	}
	if len(fds) == 0 {
		t.Fatalf("%s lists no descriptor", filepath.Base(path))
	}
	return fds
}

// readEnv reads the output of env(1), skipping lines that continue a
// multi-line value.
func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, line := range strings.Split(readFile(t, path), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}
