package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/proctest"
)

// remoteOutputWorkflow has two jobs that print on standard output and
// error, run on a remote worker.
const remoteOutputWorkflow = `jobs:
  - id: a
    run: echo out-of-a; echo err-of-a >&2
  - id: b
    run: printf 'out-of-b\nunfinished-b'; echo err-of-b >&2
`

// startRemoteRun starts, in dir, poolrun run with args and no local
// worker (-j 0 --listen), what it prints on standard output and error
// kept apart, then, once its join file is there, poolrun worker -j 2,
// what it prints kept in agentOut.
func startRemoteRun(t *testing.T, dir string, args ...string) (pool *exec.Cmd, stdout, stderr *proctest.Buffer, agent *exec.Cmd, agentOut *proctest.Buffer) {
	t.Helper()
	pool = exec.Command(poolrunBin, append([]string{"run", "-j", "0", "--listen", "127.0.0.1:0", "--join-file", "run.join"}, args...)...)
	pool.Dir = dir
	stdout, stderr = new(proctest.Buffer), new(proctest.Buffer)
	pool.Stdout, pool.Stderr = stdout, stderr
	if err := pool.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if pool.ProcessState == nil {
			pool.Process.Kill()
			pool.Wait()
		}
	})
	waitJoinFileOf(t, filepath.Join(dir, "run.join"), stderr)
	agent, agentOut = startAgent(t, dir, "2")
	return pool, stdout, stderr, agent, agentOut
}

// TestRemoteJobOutput is point 11 of issue 34: what a job run on a
// remote worker (poolrun worker) prints reaches the pool's standard
// output and error, tagged with --tag and echoed with -v as a local
// job's, with an unfinished last line ended; poolrun worker prints none
// of it.
func TestRemoteJobOutput(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(remoteOutputWorkflow), 0o644)
	pool, stdout, stderr, agent, agentOut := startRemoteRun(t, dir, "--tag", "-v", "wf.yaml")
	if err := pool.Wait(); err != nil {
		t.Fatalf("the pool: %v\n%s%s", err, stdout, stderr)
	}
	if err := agent.Wait(); err != nil {
		t.Errorf("poolrun worker: %v\n%s", err, agentOut)
	}
	outLines := strings.Split(stdout.String(), "\n")
	errLines := strings.Split(stderr.String(), "\n")
	for _, want := range []string{"[a] out-of-a", "[b] out-of-b", "[b] unfinished-b", "[a] echo out-of-a; echo err-of-a >&2"} {
		if !slices.Contains(outLines, want) {
			t.Errorf("the pool's stdout has no line %q:\n%s", want, stdout)
		}
	}
	for _, want := range []string{"[a] err-of-a", "[b] err-of-b"} {
		if !slices.Contains(errLines, want) {
			t.Errorf("the pool's stderr has no line %q:\n%s", want, stderr)
		}
	}
	if s := agentOut.String(); strings.Contains(s, "-of-") || strings.Contains(s, "unfinished") {
		t.Errorf("poolrun worker printed its jobs' output:\n%s", s)
	}
}

// TestRemoteJobLogDir: with --log-dir and --listen, the log folder is
// one of the folders that the join file names as the pool's outputs
// (which a worker checks it can write before it joins), and a job run on
// a remote worker writes its logs there, as a local job does, printing
// nothing on either terminal.
func TestRemoteJobLogDir(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(remoteOutputWorkflow), 0o644)
	pool, stdout, stderr, agent, agentOut := startRemoteRun(t, dir, "--log-dir", "logs", "wf.yaml")
	data, err := os.ReadFile(filepath.Join(dir, "run.join"))
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Outputs []string `json:"outputs"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(dir, "logs")
	if real, err := filepath.EvalSymlinks(dir); err == nil && !slices.Contains(j.Outputs, logs) {
		logs = filepath.Join(real, "logs")
	}
	if !slices.Contains(j.Outputs, logs) {
		t.Errorf("the join file's outputs are %q: the log folder %s is not among them", j.Outputs, logs)
	}
	if err := pool.Wait(); err != nil {
		t.Fatalf("the pool: %v\n%s%s", err, stdout, stderr)
	}
	if err := agent.Wait(); err != nil {
		t.Errorf("poolrun worker: %v\n%s", err, agentOut)
	}
	for name, want := range map[string]string{"a.out": "out-of-a\n", "a.err": "err-of-a\n", "b.out": "out-of-b\nunfinished-b", "b.err": "err-of-b\n"} {
		got, err := os.ReadFile(filepath.Join(dir, "logs", name))
		if err != nil || string(got) != want {
			t.Errorf("logs/%s: %q, %v; want %q", name, got, err, want)
		}
	}
	for what, s := range map[string]string{"the pool": stdout.String() + stderr.String(), "poolrun worker": agentOut.String()} {
		if strings.Contains(s, "-of-") {
			t.Errorf("%s printed the jobs' output, which went to --log-dir:\n%s", what, s)
		}
	}
}

// waitJoinFileOf waits up to a minute for joinFile, as waitJoinFile does,
// for a pool that prints to out.
func waitJoinFileOf(t *testing.T, joinFile string, out *proctest.Buffer) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(joinFile); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no join file after a minute:\n%s", out)
		}
	}
}
