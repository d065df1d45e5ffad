package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/cli"
)

// rolePoolrun is the test binary as the poolrun command (cmd/poolrun's
// main, whose engine.Init TestMain has called already), which
// poolrunCommand runs under -short, where it builds nothing.
func rolePoolrun() int {
	err := cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	if err != nil && cli.ExitCode(err) != cli.ExitOK {
		fmt.Fprintln(os.Stderr, err)
	}
	return cli.ExitCode(err)
}

// makeJobs is how many jobs of `true` BenchmarkVersusMake (and
// BenchmarkForkWait) run per tool.
const makeJobs = 1000

// versusMakeJobs returns how many jobs of `true` BenchmarkVersusMake runs
// per tool: a handful under -short, so that CI's smoke run only checks
// that it works.
func versusMakeJobs() int {
	if testing.Short() {
		return 10
	}
	return makeJobs
}

// BenchmarkVersusMake runs the same jobs of `true` (versusMakeJobs), two at a
// time, with `make -j2` (GNU make, phony targets) and with
// `poolrun run -j 2`, one after the other in every op (which goes first
// alternates), and reports each tool's wall time and CPU time per job
// (the CPU time of the tool's process and of every process under it, as
// wait4 gives it) and their ratios, poolrun's over make's: below 1,
// poolrun spends less. poolrun is the command built from this tree
// (poolrunCommand). The workflow is written as a user writes it: one
// job entry with a foreach over 1..N. One op is one run of each. Skipped
// where make is not installed.
func BenchmarkVersusMake(b *testing.B) {
	makePath, err := exec.LookPath("make")
	if err != nil {
		b.Skip("make is not installed")
	}
	n := versusMakeJobs()
	dir := b.TempDir()
	wf := fmt.Sprintf("jobs:\n  - id: t-${i}\n    foreach: {i: 1..%d}\n    run: \"true\"\n", n)
	var mk strings.Builder
	targets := make([]string, n)
	for i := range n {
		targets[i] = fmt.Sprintf("t-%d", i+1)
	}
	fmt.Fprintf(&mk, ".PHONY: all %s\nall: %s\n", strings.Join(targets, " "), strings.Join(targets, " "))
	for _, t := range targets {
		mk.WriteString(t + ":\n\t@true\n")
	}
	for name, text := range map[string]string{"jobs.yaml": wf, "Makefile": mk.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	tools := []struct {
		name string
		cmd  func() *exec.Cmd
	}{
		{"make", func() *exec.Cmd { return exec.Command(makePath, "-s", "-j2") }},
		{"poolrun", func() *exec.Cmd { return poolrunCommand(b, "run", "-j", "2", "jobs.yaml") }},
	}
	var wall, cpu [2]time.Duration
	b.ResetTimer()
	for i := range b.N {
		for k := range tools {
			k = (k + i) % len(tools) // alternate which goes first
			cmd := tools[k].cmd()
			cmd.Dir = dir
			start := time.Now()
			out, err := cmd.CombinedOutput()
			wall[k] += time.Since(start)
			if err != nil {
				b.Fatalf("%s: %v\n%s", tools[k].name, err, out)
			}
			ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			cpu[k] += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	b.StopTimer()
	perJob := func(d time.Duration) float64 { return d.Seconds() * 1e3 / float64(b.N*n) }
	b.ReportMetric(perJob(wall[0]), "make-ms/job")
	b.ReportMetric(perJob(wall[1]), "poolrun-ms/job")
	b.ReportMetric(perJob(cpu[0]), "make-cpu-ms/job")
	b.ReportMetric(perJob(cpu[1]), "poolrun-cpu-ms/job")
	b.ReportMetric(wall[1].Seconds()/wall[0].Seconds(), "wall-ratio")
	b.ReportMetric(cpu[1].Seconds()/cpu[0].Seconds(), "cpu-ratio")
}

// BenchmarkOwnCPU runs BenchmarkVersusMake's workflow (versusMakeJobs
// jobs of `true`, -j 2) with poolrun run in this process (cli.Main, whose
// workers are goroutines here, as in the command) and reports the CPU
// time per job of this process's own threads (self-us/job) and of the
// commands it ran (children-us/job), from getrusage. It is the part of
// BenchmarkVersusMake's poolrun figure that is poolrun's own, with
// nothing else in the process: run it with -cpuprofile to see where that
// goes, with -benchmem for what it allocates per run.
func BenchmarkOwnCPU(b *testing.B) {
	n := versusMakeJobs()
	dir := b.TempDir()
	wf := fmt.Sprintf("jobs:\n  - id: t-${i}\n    foreach: {i: 1..%d}\n    run: \"true\"\n", n)
	if err := os.WriteFile(filepath.Join(dir, "jobs.yaml"), []byte(wf), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Chdir(dir)
	var self0, kids0, self1, kids1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self0)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids0)
	for b.Loop() {
		if err := cli.Main(context.Background(), []string{"run", "-j", "2", "jobs.yaml"}, io.Discard, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &self1)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids1)
	cpu := func(r *syscall.Rusage) time.Duration { return time.Duration(r.Utime.Nano() + r.Stime.Nano()) }
	perJob := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N*n) }
	b.ReportMetric(perJob(cpu(&self1)-cpu(&self0)), "self-us/job")
	b.ReportMetric(perJob(cpu(&kids1)-cpu(&kids0)), "children-us/job")
}

// BenchmarkFirstCommand times a one-job run from the start of the tool's
// process to the start of its one command, `poolrun run` of a workflow of
// one job against `make` of one target, one after the other in every op
// (which goes first alternates): the command prints the clock
// (`date +%s%N`), taken just before the tool is started. It reports each
// tool's median in ms and poolrun's over make's. poolrun is the command
// built from this tree (poolrunCommand). Skipped where make or date is not
// installed.
func BenchmarkFirstCommand(b *testing.B) {
	makePath, err := exec.LookPath("make")
	if err != nil {
		b.Skip("make is not installed")
	}
	if _, err := exec.LookPath("date"); err != nil {
		b.Skip("date is not installed")
	}
	dir := b.TempDir()
	for name, text := range map[string]string{
		"jobs.yaml": "jobs:\n  - id: one\n    run: date +%s%N\n",
		"Makefile":  "all:\n\t@date +%s%N\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	tools := []struct {
		name string
		cmd  func() *exec.Cmd
	}{
		{"make", func() *exec.Cmd { return exec.Command(makePath, "-s") }},
		{"poolrun", func() *exec.Cmd { return poolrunCommand(b, "run", "jobs.yaml") }},
	}
	var first [2][]float64
	b.ResetTimer()
	for i := range b.N {
		for k := range tools {
			k = (k + i) % len(tools)
			cmd := tools[k].cmd()
			cmd.Dir = dir
			start := time.Now()
			out, err := cmd.Output()
			if err != nil {
				b.Fatalf("%s: %v\n%s", tools[k].name, err, out)
			}
			line, _, _ := strings.Cut(string(out), "\n")
			ns, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
			if err != nil {
				b.Fatalf("%s printed %q, not the clock", tools[k].name, out)
			}
			first[k] = append(first[k], float64(ns-start.UnixNano())/1e6)
		}
	}
	b.StopTimer()
	med := func(x []float64) float64 { slices.Sort(x); return x[len(x)/2] }
	m, p := med(first[0]), med(first[1])
	b.ReportMetric(m, "make-first-ms")
	b.ReportMetric(p, "poolrun-first-ms")
	b.ReportMetric(p/m, "first-ratio")
}
