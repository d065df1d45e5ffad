package workflow_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/workflow"
)

// examples lists the workflow files of the repository's examples folder
// (scaffold-*.yaml are scaffold configurations, for poolrun scaffold).
func examples(t *testing.T) []string {
	t.Helper()
	all, err := filepath.Glob(filepath.Join("..", "..", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range all {
		if !strings.HasPrefix(filepath.Base(f), "scaffold-") {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		t.Fatal("no examples/*.yaml")
	}
	return files
}

// TestExamplesLoad checks that every example parses and says how to run it.
func TestExamplesLoad(t *testing.T) {
	for _, file := range examples(t) {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			w, err := workflow.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(data, []byte("# ")) {
				t.Error("does not begin with a comment")
			}
			if run := "poolrun run examples/" + name; !bytes.Contains(data, []byte(run)) {
				t.Errorf("the comment does not say %q", run)
			}
			t.Logf("%d jobs, %d items", len(w.Jobs), len(w.Items))
		})
	}
}

// TestExamplesRun runs every example the simplest way there is: one job
// at a time, in file order, each item built the first time a job needs it,
// in a fresh working folder, with the variables poolrun gives a job
// ($POOLRUN_JOB, _THREADS, _ATTEMPT, _RES_*). It checks that every
// command succeeds and that nothing is written outside the example's own
// folder.
func TestExamplesRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs shell commands")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh:", err)
	}
	for _, file := range examples(t) {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			w, err := workflow.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			work, tmp, scratch := t.TempDir(), t.TempDir(), t.TempDir()
			start := time.Now()
			built := make(map[string]string) // item name -> path
			for _, j := range w.Jobs {
				env := append(os.Environ(), "TMPDIR="+tmp)
				for _, need := range j.Needs {
					path, ok := built[need]
					if !ok {
						path = filepath.Join(scratch, need)
						it := w.ItemByName(need)
						runSh(t, "item "+need, it.Run, work, append(env, workflow.ItemEnv+"="+path))
						built[need] = path
					}
					env = append(env, workflow.EnvName(need)+"="+path)
				}
				// A job with retries runs again when it fails, as
				// poolrun runs it; its last run must succeed.
				var out []byte
				env = append(env, "POOLRUN_JOB="+j.ID, fmt.Sprintf("POOLRUN_THREADS=%d", max(j.Threads, 1)))
				for name, n := range j.Resources {
					env = append(env, fmt.Sprintf("%s=%d", workflow.ResourceEnv(name), n))
				}
				for try := 0; ; try++ {
					cmd := exec.Command("sh", "-c", j.Run)
					cmd.Dir, cmd.Env = work, append(env, fmt.Sprintf("POOLRUN_ATTEMPT=%d", try+1))
					var stderr bytes.Buffer
					cmd.Stderr = &stderr
					o, err := cmd.Output()
					if err == nil {
						out = o
						break
					}
					if j.Retries == nil || try >= *j.Retries {
						t.Fatalf("job %s: %v\n%s", j.ID, err, stderr.Bytes())
					}
				}
				if len(out) > 0 {
					t.Logf("%s: %s", j.ID, bytes.TrimSpace(out))
				}
			}
			t.Logf("%d jobs in %v", len(w.Jobs), time.Since(start).Round(time.Millisecond))

			want := "poolrun-example-" + name
			if got := dirNames(t, work); len(got) != 1 || got[0] != want {
				t.Errorf("working folder holds %q, want only %s", got, want)
			}
			if got := dirNames(t, tmp); len(got) != 0 {
				t.Errorf("TMPDIR holds %q, want nothing", got)
			}
		})
	}
}

func runSh(t *testing.T, what, command, dir string, env []string) []byte {
	t.Helper()
	cmd := exec.Command("sh", "-c", command)
	cmd.Dir = dir
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, stderr.Bytes())
	}
	return out
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
