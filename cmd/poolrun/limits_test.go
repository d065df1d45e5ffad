package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/proctest"
)

// A file over the limit (16 MiB, sparse here) as a workflow or a scaffold
// configuration is refused at once, naming the file, its size and the
// limit, with exit status 2. (An endless device is not a regular file:
// TestOddFilesRefused.)
func TestRefusesHugeFiles(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"run", []string{"run", "huge.yaml"}},
		{"scaffold config", []string{"scaffold", "--config", "huge.yaml", "--out", "out"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			huge := filepath.Join(dir, "huge.yaml")
			if err := os.WriteFile(huge, []byte("# huge\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(huge, 16<<20+1); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			r := poolrun(t, dir, tt.args...)
			took := time.Since(start)
			if r.code != 2 {
				t.Errorf("exit %d, want 2\n%s", r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, "huge.yaml") || !strings.Contains(r.stderr, "16777217 bytes") || !strings.Contains(r.stderr, "16 MiB") {
				t.Errorf("stderr does not name the file, its size and the limit: %q", r.stderr)
			}
			if took > 10*time.Second {
				t.Errorf("took %v to refuse", took)
			}
			if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
				t.Error("the output folder was created: something ran")
			}
		})
	}
}

// Flags out of range are refused, naming the flag and the allowed range,
// with exit status 2.
func TestPoolFlagsOutOfRange(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte("jobs:\n  - id: a\n    run: touch ran-a\n"), 0o644)
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"run capacity too large", []string{"run", "--capacity", "100000000", "wf.yaml"}, []string{"--capacity 100000000", "1 to 16777216"}},
		{"run capacity zero", []string{"run", "--capacity", "0", "wf.yaml"}, []string{"--capacity 0", "1 to 16777216"}},
		{"scaffold capacity too large", []string{"scaffold", "--capacity", "16777217", "--out", "out"}, []string{"--capacity 16777217", "1 to 16777216"}},
		{"bench capacity too large", []string{"bench", "--capacity", "100000000"}, []string{"--capacity 100000000", "1 to 16777216"}},
		{"run negative -j", []string{"run", "-j", "-1", "wf.yaml"}, []string{"-j -1", "from 1 to 4096", "0: serial"}},
		{"run -j too large", []string{"run", "-j", "100000", "wf.yaml"}, []string{"-j 100000", "from 1 to 4096"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := poolrun(t, dir, tt.args...)
			if r.code != 2 {
				t.Errorf("exit %d, want 2\n%s", r.code, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr %q does not contain %q", r.stderr, w)
				}
			}
			if ran, _ := filepath.Glob(filepath.Join(dir, "ran-*")); len(ran) > 0 {
				t.Errorf("jobs ran: %v", ran)
			}
		})
	}
}

// reportOf reads the options and the workers of a JSON report.
type reportOf struct {
	Options struct {
		Workers int `json:"workers"`
	} `json:"options"`
	Workers []struct {
		PID int `json:"pid"`
	} `json:"workers"`
	Totals struct {
		ByStatus map[string]int `json:"by_status"`
	} `json:"totals"`
}

func readReport(t *testing.T, path string) reportOf {
	t.Helper()
	var rep reportOf
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rep
}

// -j 0 means serial, as --serial does, and the two together agree; -j
// above the number of jobs starts at most one worker per job.
func TestWorkerCount(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte("jobs:\n  - id: a\n    run: 'true'\n  - id: b\n    run: 'true'\n"), 0o644)
	tiny := `seed: 1
box:
  size: 300
  chunk: 300
cell_types:
  - name: golgi
    density: 9000
    radius: 8
connections:
  - name: golgi_to_golgi
    from: golgi
    to: golgi
    max_distance: 50
    max_per_target: 4
`
	os.WriteFile(filepath.Join(dir, "tiny.yaml"), []byte(tiny), 0o644)
	for _, tt := range []struct {
		name    string
		args    []string
		workers int // the report's options.workers, and the most worker entries (at least 1: serial has one)
	}{
		{"serial and -j 0", []string{"run", "--serial", "-j", "0", "wf.yaml"}, 0},
		{"-j 0", []string{"run", "-j", "0", "wf.yaml"}, 0},
		{"run -j above the jobs", []string{"run", "-j", "8", "wf.yaml"}, 2},
		// The tiny scaffold's jobs make a chain (place, then connect): the
		// pool starts its workers as jobs wait for them, one or two.
		{"scaffold -j above the jobs", []string{"scaffold", "-j", "8", "--config", "tiny.yaml", "--out", "out"}, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{tt.args[0], "--quiet", "--report", "report.json"}, tt.args[1:]...)
			r := poolrun(t, dir, args...)
			if r.code != 0 {
				t.Fatalf("poolrun %v: exit %d\n%s", args, r.code, r.stderr)
			}
			rep := readReport(t, filepath.Join(dir, "report.json"))
			if rep.Options.Workers != tt.workers {
				t.Errorf("options.workers = %d, want %d", rep.Options.Workers, tt.workers)
			}
			if most := max(tt.workers, 1); len(rep.Workers) < 1 || len(rep.Workers) > most {
				t.Errorf("%d workers in the report, want 1 to %d", len(rep.Workers), most)
			}
			if rep.Totals.ByStatus["succeeded"] != 2 {
				t.Errorf("jobs: %v, want 2 succeeded", rep.Totals.ByStatus)
			}
		})
	}
}

// A job whose worker died is reported as Aborted under its job id. The
// worker is a remote one (poolrun run's own are goroutines of its process,
// see TestRunRetries).
func TestRunAbortedJobNamed(t *testing.T) {
	dir := t.TempDir()
	wf := "jobs:\n  - id: fine\n    run: echo fine\n  - id: boom\n    run: kill -9 $PPID\n"
	os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(wf), 0o644)
	r := runWithRemoteWorkers(t, dir, "wf.yaml")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	if want := `poolrun: job "boom" (wf.yaml:4): aborted: worker process died`; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr does not contain %q:\n%s", want, r.stderr)
	}
}

// SIGTERM and SIGHUP end a run as SIGINT does: exit status 130, the report
// written, no worker, command or scratch folder left.
func TestRunTerminated(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			wf := "jobs:\n  - id: long\n    run: echo $$ > long.pid; sleep 30 & sleep 30; wait\n"
			cmd, shell := startLongJob(t, dir, wf, "--report", "report.json")
			// run's workers are goroutines of poolrun: its children are
			// the command's shell and the janitor, and any scratch folder
			// is poolrun's.
			workers := proctest.Children(cmd.Process.Pid)
			sleeps := proctest.Children(shell)
			scratch := scratchFolders([]int{cmd.Process.Pid})
			if len(workers) == 0 || len(sleeps) == 0 {
				t.Fatalf("poolrun's children %v, the command's children %v", workers, sleeps)
			}
			cmd.Process.Signal(sig)
			cmd.Wait()
			if code := cmd.ProcessState.ExitCode(); code != 130 {
				t.Errorf("exit status %d, want 130", code)
			}
			if left := proctest.WaitGone(append(append(workers, shell), sleeps...), 10*time.Second); len(left) > 0 {
				t.Errorf("processes %v outlived poolrun (workers %v, shell %d, its children %v)", left, workers, shell, sleeps)
			}
			for _, f := range scratch {
				if _, err := os.Stat(f); err == nil {
					t.Errorf("scratch folder %s left behind", f)
				}
			}
			rep := readReport(t, filepath.Join(dir, "report.json"))
			if len(rep.Workers) == 0 || rep.Totals.ByStatus["succeeded"] != 0 {
				t.Errorf("report: %+v", rep)
			}
		})
	}
}
