package execflow_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/internal/execflow"
)

func itoa(n int) string { return strconv.Itoa(n) }

// TestEnv checks what a job's command finds: its id in POOLRUN_JOB, the
// path of each item it needs in POOLRUN_ITEM_<NAME>, the extra environment,
// poolrun's environment without the engine's worker marker, its working
// folder, and none of the worker's protocol descriptors.
func TestEnv(t *testing.T) {
	t.Setenv("EXECFLOW_TEST_INHERITED", "yes")
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			wf := parse(t, "env.yaml", `
items:
  ref-2:
    run: env > "$POOLRUN_ITEM"
jobs:
  - id: show
    needs: [ref-2]
    run: |
      env > "$LOG/env"
      pwd -P > "$LOG/pwd"
      cp "$POOLRUN_ITEM_REF_2" "$LOG/item-env"
      for fd in 3 4 5; do
        a=$(readlink /proc/$PPID/fd/$fd 2>/dev/null)
        b=$(readlink /proc/$$/fd/$fd 2>/dev/null)
        if [ -n "$a" ] && [ "$a" = "$b" ]; then
          echo "fd $fd ($a) inherited from the worker" >&2
          exit 1
        fi
      done
`)
			logDir, root, dir := t.TempDir(), t.TempDir(), t.TempDir()
			jobs, err := run(t, wf, m.workers, execflow.Options{
				Dir: dir, Scratch: root, Env: []string{"LOG=" + logDir, "EXTRA=a=b", "EXECFLOW_TEST_INHERITED=overridden"},
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
			if v, ok := env["POOLRUN_WORKER"]; ok {
				t.Errorf("the worker marker reached the command: POOLRUN_WORKER=%q", v)
			}
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
			if _, ok := itemEnv["POOLRUN_WORKER"]; ok {
				t.Error("the worker marker reached the item's command")
			}
		})
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
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
