package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/cli"
)

// rolePoolrun is the test binary as the poolrun command (cmd/poolrun's
// main, whose engine.Init TestMain has called already):
// BenchmarkVersusMake runs it, so that it measures this tree's code
// without building it.
func rolePoolrun() int {
	err := cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	if err != nil && cli.ExitCode(err) != cli.ExitOK {
		fmt.Fprintln(os.Stderr, err)
	}
	return cli.ExitCode(err)
}

// makeJobs is how many jobs of `true` BenchmarkVersusMake runs per tool.
const makeJobs = 1000

// BenchmarkVersusMake runs the same 1,000 jobs of `true`, two at a time,
// with `make -j2` (GNU make, phony targets) and with `poolrun run -j 2`,
// one after the other in every op (which goes first alternates), and
// reports each tool's wall time and CPU time per job (the CPU time of the
// tool's process and of every process under it, as wait4 gives it) and
// their ratios, poolrun's over make's: below 1, poolrun spends less. One op
// is one run of each. Skipped where make is not installed.
func BenchmarkVersusMake(b *testing.B) {
	makePath, err := exec.LookPath("make")
	if err != nil {
		b.Skip("make is not installed")
	}
	dir := b.TempDir()
	var wf, mk strings.Builder
	wf.WriteString("jobs:\n")
	mk.WriteString(".PHONY: all")
	targets := make([]string, makeJobs)
	for i := range makeJobs {
		targets[i] = fmt.Sprintf("j%d", i)
		fmt.Fprintf(&wf, "  - {id: j%d, run: \"true\"}\n", i)
		mk.WriteString(" " + targets[i])
	}
	mk.WriteString("\nall: " + strings.Join(targets, " ") + "\n")
	for _, t := range targets {
		mk.WriteString(t + ":\n\t@true\n")
	}
	for name, text := range map[string]string{"jobs.yaml": wf.String(), "Makefile": mk.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	tools := []struct {
		name string
		cmd  func() *exec.Cmd
	}{
		{"make", func() *exec.Cmd { return exec.Command(makePath, "-s", "-j2") }},
		{"poolrun", func() *exec.Cmd {
			c := exec.Command(os.Args[0], "run", "-j", "2", "jobs.yaml")
			c.Env = append(os.Environ(), envRole+"=poolrun")
			return c
		}},
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
	perJob := func(d time.Duration) float64 { return d.Seconds() * 1e3 / float64(b.N*makeJobs) }
	b.ReportMetric(perJob(wall[0]), "make-ms/job")
	b.ReportMetric(perJob(wall[1]), "poolrun-ms/job")
	b.ReportMetric(perJob(cpu[0]), "make-cpu-ms/job")
	b.ReportMetric(perJob(cpu[1]), "poolrun-cpu-ms/job")
	b.ReportMetric(wall[1].Seconds()/wall[0].Seconds(), "wall-ratio")
	b.ReportMetric(cpu[1].Seconds()/cpu[0].Seconds(), "cpu-ratio")
}
