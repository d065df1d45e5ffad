package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/workflow"
)

// planSizes returns the workflow sizes, in jobs, of BenchmarkPlan: a
// small one alone under -short.
func planSizes() []int {
	if testing.Short() {
		return []int{1_000}
	}
	return []int{10_000, 100_000, 1_000_000}
}

// planFlow is a workflow of n independent jobs written as a user writes
// them, one foreach entry, each making one file; planMakefile is the
// same for make: n targets of all, one pattern rule.
const planFlow = `jobs:
  - id: j-${i}
    foreach: {i: "1..${n}"}
    run: touch out/${i}
    outputs: ["out/${i}"]
`

func planMakefile(n int) []byte {
	b := []byte("all:")
	for i := 1; i <= n; i++ {
		b = append(b, " out/"...)
		b = strconv.AppendInt(b, int64(i), 10)
	}
	return append(b, "\nout/%:\n\ttouch $@\n"...)
}

// BenchmarkPlan reads a workflow of n jobs (planFlow) and decides which
// of them run, as poolrun run -n does: parse, expand, resolve, then
// execflow.NewPlan, which looks at every output. One op is one whole
// plan, in this process. It reports the time and the heap in use after
// it per job, and, where make is installed, make -n -r of the same
// targets (planMakefile) per job and poolrun's time over make's, the two
// alternated in every op.
func BenchmarkPlan(b *testing.B) {
	makePath, _ := exec.LookPath("make")
	for _, n := range planSizes() {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			b.Chdir(dir) // the workflow named as a user names it
			file := "wf.yaml"
			if err := os.WriteFile(file, []byte(planFlow), 0o644); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "Makefile"), planMakefile(n), 0o644); err != nil {
				b.Fatal(err)
			}
			opts := workflow.Options{Set: map[string]string{"n": strconv.Itoa(n)}}
			var plan, makeTime time.Duration
			var heap uint64
			b.ResetTimer()
			for i := range b.N {
				if makePath != "" && i%2 == 1 {
					makeTime += timeMake(b, makePath, dir)
				}
				var before runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				start := time.Now()
				wf, err := workflow.LoadWith(file, opts)
				if err != nil {
					b.Fatal(err)
				}
				p, err := execflow.NewPlan(wf, execflow.PlanOptions{})
				if err != nil {
					b.Fatal(err)
				}
				plan += time.Since(start)
				var after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&after)
				heap += after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
				if len(p.Decisions) != n {
					b.Fatalf("%d decisions, want %d", len(p.Decisions), n)
				}
				runtime.KeepAlive(p)
				if makePath != "" && i%2 == 0 {
					makeTime += timeMake(b, makePath, dir)
				}
			}
			perJob := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) / float64(n) }
			b.ReportMetric(perJob(plan), "ns/job")
			b.ReportMetric(float64(heap)/float64(b.N)/float64(n), "heap-B/job")
			if makePath != "" {
				b.ReportMetric(perJob(makeTime), "make-ns/job")
				b.ReportMetric(plan.Seconds()/makeTime.Seconds(), "plan-ratio")
			}
		})
	}
}

// timeMake runs make -n -r in dir and returns how long it took.
func timeMake(b *testing.B, makePath, dir string) time.Duration {
	b.Helper()
	cmd := exec.Command(makePath, "-n", "-r", "-s")
	cmd.Dir = dir
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("make -n: %v\n%.500s", err, out)
	}
	return time.Since(start)
}

// nullRunJobs returns how many jobs BenchmarkNullRun's workflow has: a
// handful under -short.
func nullRunJobs() int {
	if testing.Short() {
		return 100
	}
	return 10_000
}

// BenchmarkNullRun times a run in which everything is up to date: n jobs
// of `cp in/N out/N` (inputs in/${i}, outputs out/${i}), written as a
// user writes them (one foreach entry), with poolrun run -j 2, against
// make -r -j2 of the same rule, one after the other in every op (which
// goes first alternates), after a first run of each that made the
// outputs (untimed). It reports each tool's wall time per job and
// poolrun's over make's. (Not their peak RSS: wait4's counts what the
// process that started them held, as an exec carries it over.) poolrun is the
// command built from this tree (poolrunCommand). Skipped where make is
// not installed.
func BenchmarkNullRun(b *testing.B) {
	makePath, err := exec.LookPath("make")
	if err != nil {
		b.Skip("make is not installed")
	}
	n := nullRunJobs()
	dir := b.TempDir()
	flow := "jobs:\n  - id: cp-${i}\n    foreach: {i: 1.." + strconv.Itoa(n) + "}\n    run: cp in/${i} out/${i}\n" +
		"    inputs: [\"in/${i}\"]\n    outputs: [\"out/${i}\"]\n"
	mk := []byte("all:")
	for i := 1; i <= n; i++ {
		mk = append(mk, " out/"...)
		mk = strconv.AppendInt(mk, int64(i), 10)
	}
	mk = append(mk, "\nout/%: in/%\n\t@cp $< $@\n"...)
	for _, d := range []string{"in", "out", filepath.Join("m", "in"), filepath.Join("m", "out")} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for i := 1; i <= n; i++ {
		for _, d := range []string{"in", filepath.Join("m", "in")} {
			if err := os.WriteFile(filepath.Join(dir, d, strconv.Itoa(i)), []byte("x\n"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(flow), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "m", "Makefile"), mk, 0o644); err != nil {
		b.Fatal(err)
	}
	tools := []struct {
		name string
		cmd  func() *exec.Cmd
	}{
		{"make", func() *exec.Cmd {
			c := exec.Command(makePath, "-r", "-s", "-j2")
			c.Dir = filepath.Join(dir, "m")
			return c
		}},
		{"poolrun", func() *exec.Cmd {
			c := poolrunCommand(b, "run", "-j", "2", "wf.yaml")
			c.Dir = dir
			return c
		}},
	}
	run := func(k int) time.Duration {
		cmd := tools[k].cmd()
		start := time.Now()
		out, err := cmd.CombinedOutput()
		wall := time.Since(start)
		if err != nil {
			b.Fatalf("%s: %v\n%.2000s", tools[k].name, err, out)
		}
		return wall
	}
	for k := range tools {
		run(k) // the first run makes the outputs
	}
	var wall [2]time.Duration
	b.ResetTimer()
	for i := range b.N {
		for k := range tools {
			k = (k + i) % len(tools)
			wall[k] += run(k)
		}
	}
	b.StopTimer()
	perJob := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(b.N*n) }
	b.ReportMetric(perJob(wall[0]), "make-us/job")
	b.ReportMetric(perJob(wall[1]), "poolrun-us/job")
	b.ReportMetric(wall[1].Seconds()/wall[0].Seconds(), "wall-ratio")
}
