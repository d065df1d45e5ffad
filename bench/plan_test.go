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
