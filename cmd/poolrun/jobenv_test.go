package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A job's command learns its threads, its attempt and its named
// resources from its environment, and named resources bound what runs
// at once.

// TestRunJobEnv: a job that fails on its first run and passes on its
// second (retries: 1) sees POOLRUN_ATTEMPT 1 then 2, its threads: in
// POOLRUN_THREADS (1 without threads:) and its resources: in
// POOLRUN_RES_<NAME>.
func TestRunJobEnv(t *testing.T) {
	dir := t.TempDir()
	writeWorkflow(t, dir, `jobs:
  - id: flaky
    threads: 3
    retries: 1
    resources: {gpu: 1, scratch_disk: 40}
    run: 'echo "$POOLRUN_JOB $POOLRUN_ATTEMPT $POOLRUN_THREADS $POOLRUN_RES_GPU $POOLRUN_RES_SCRATCH_DISK" >> flaky.log; [ "$POOLRUN_ATTEMPT" -ge 2 ]'
  - id: plain
    run: 'echo "$POOLRUN_JOB $POOLRUN_ATTEMPT $POOLRUN_THREADS ${POOLRUN_RES_GPU-none}" > plain.log'
`)
	r := poolrun(t, dir, "run", "-j", "4", "--quiet", "wf.yaml")
	if r.code != 0 {
		t.Fatalf("exit %d, want 0\n%s", r.code, r.stderr)
	}
	for file, want := range map[string]string{
		"flaky.log": "flaky 1 3 1 40\nflaky 2 3 1 40\n",
		"plain.log": "plain 1 1 none\n",
	} {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != want {
			t.Errorf("%s: %q, want %q", file, data, want)
		}
	}
}

// exclusiveCommand is a job's command that fails if another job with
// the same command runs while it does: it takes the lock "held" (mkdir,
// which fails if the folder is there), marks itself in running/, and
// watches for another mark for a moment (a window to see an overlap in,
// not a synchronisation: a run that passes does not depend on it).
func exclusiveCommand(name string) string {
	return fmt.Sprintf(`mkdir -p running; mkdir held 2>/dev/null || { echo "%[1]s: another job holds the lock" >&2; exit 3; }; touch running/%[1]s; i=0; while [ $i -lt 20 ]; do if [ "$(ls running | wc -l)" -ne 1 ]; then echo "%[1]s overlaps: $(ls running)" >&2; exit 3; fi; i=$((i+1)); sleep 0.01; done; rm running/%[1]s; rmdir held; touch done-%[1]s`, name)
}

// meetCommand is a job's command that ends only once the job other has
// started too: it marks itself and waits, up to 30 seconds, for other's
// mark (the deadline: it fails rather than hang).
func meetCommand(name, other string) string {
	return fmt.Sprintf(`touch here-%[1]s; i=0; while [ ! -e here-%[2]s ]; do i=$((i+1)); if [ $i -gt 3000 ]; then echo "%[1]s: %[2]s never ran with it" >&2; exit 4; fi; sleep 0.01; done`, name, other)
}

// gpuJobs is a workflow of two jobs that take a GPU each, with the
// commands of cmd, and top, a top-level field or "".
func gpuJobs(top string, cmd func(name, other string) string) string {
	var b strings.Builder
	b.WriteString(top)
	b.WriteString("jobs:\n")
	for _, pair := range [][2]string{{"a", "b"}, {"b", "a"}} {
		fmt.Fprintf(&b, "  - id: %s\n    resources: {gpu: 1}\n    run: '%s'\n", pair[0], cmd(pair[0], pair[1]))
	}
	return b.String()
}

// TestRunNamedResources: two jobs that take a GPU each never run at once
// when the limit (--resources, or the workflow's resources:) is one GPU,
// and run at once when it is two, or when no limit is given anywhere (a
// resource without a limit is not counted, as in Snakemake); --resources
// wins over the workflow's resources:.
func TestRunNamedResources(t *testing.T) {
	t.Parallel()
	exclusive := func(name, _ string) string { return exclusiveCommand(name) }
	for _, tc := range []struct {
		name string
		top  string
		args []string
		cmd  func(name, other string) string
	}{
		{"--resources gpu=1", "", []string{"--resources", "gpu=1"}, exclusive},
		{"resources: gpu 1", "resources: {gpu: 1}\n", nil, exclusive},
		{"--resources over resources:", "resources: {gpu: 2}\n", []string{"--resources", "licence=3", "--resources", "gpu=1"}, exclusive},
		{"--resources gpu=2", "", []string{"--resources", "gpu=2"}, meetCommand},
		{"resources: gpu 2", "resources: {gpu: 2, licence: 1}\n", nil, meetCommand},
		{"--resources gpu=2 over resources: gpu 1", "resources: {gpu: 1}\n", []string{"--resources", "gpu=2,licence=1"}, meetCommand},
		{"no limit", "", nil, meetCommand},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeWorkflow(t, dir, gpuJobs(tc.top, tc.cmd))
			r := poolrun(t, dir, append(append([]string{"run", "-j", "2", "--quiet"}, tc.args...), "wf.yaml")...)
			if r.code != 0 {
				t.Fatalf("exit %d, want 0\n%s", r.code, r.stderr)
			}
		})
	}
}

// TestRunNamedResourceAlone: a job that takes more of a resource than its
// limit runs alone, with a warning that names it.
func TestRunNamedResourceAlone(t *testing.T) {
	dir := t.TempDir()
	writeWorkflow(t, dir, fmt.Sprintf(`resources: {gpu: 1}
jobs:
  - id: big
    resources: {gpu: 2}
    run: '%s'
  - id: small
    resources: {gpu: 1}
    run: '%s'
`, exclusiveCommand("big"), exclusiveCommand("small")))
	r := poolrun(t, dir, "run", "-j", "2", "--quiet", "wf.yaml")
	if r.code != 0 {
		t.Fatalf("exit %d, want 0\n%s", r.code, r.stderr)
	}
	if want := `poolrun run: wf.yaml:3: job "big" has resources: gpu: 2, more than the limit 1 (the workflow's resources:): it runs alone`; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
	}
}

// TestRunNamedResourcesBadInput: bad resources: fields and --resources
// values are refused with FILE:LINE and the job (or the flag), exit
// status 2, and nothing runs.
func TestRunNamedResourcesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, top, field string
		args             []string
		want             string
	}{
		{"negative", "", "resources: {gpu: -1}", nil, `wf.yaml:4: job "a": resources: gpu -1: want a whole number, 0 or more`},
		{"not a whole number", "", "resources: {gpu: 0.5}", nil, `wf.yaml:4: job "a": resources: gpu 0.5: want a whole number, 0 or more`},
		{"bad name", "", "resources: {my-gpu: 1}", nil, `wf.yaml:4: job "a": resources: "my-gpu" is not a resource name`},
		{"threads", "", "resources: {threads: 2}", nil, `wf.yaml:4: job "a": resources: threads is not a named resource: write it as the job's threads: field`},
		{"mem at the top", "resources: {mem: 2}\n", "", nil, `wf.yaml:1: resources: mem is not a named resource: its limit is poolrun run's --mem`},
		{"twice at the top", "resources:\n  gpu: 1\n  gpu: 2\n", "", nil, `wf.yaml:3: resources: "gpu" given twice (first at line 2)`},
		{"negative at the top", "resources: {gpu: -2}\n", "", nil, `wf.yaml:1: resources: gpu -2: want a whole number, 0 or more`},
		{"--resources without =N", "", "", []string{"--resources", "gpu"}, `--resources gpu: want gpu=N`},
		{"--resources negative", "", "", []string{"--resources", "gpu=-1"}, `--resources gpu=-1: -1: want a whole number, 0 or more`},
		{"--resources not a number", "", "", []string{"--resources", "gpu=two"}, `--resources gpu=two: two: want a whole number`},
		{"--resources bad name", "", "", []string{"--resources", "1gpu=1"}, `"1gpu" is not a resource name`},
		{"--resources twice", "", "", []string{"--resources", "gpu=1", "--resources", "gpu=2"}, `gpu given twice`},
		{"--resources mem", "", "", []string{"--resources", "mem=1"}, `mem is not a named resource: its limit is --mem`},
	} {
		t.Run(tc.name, func(t *testing.T) { refusedBeforeRun(t, tc.top, tc.field, tc.args, tc.want) })
	}
}
