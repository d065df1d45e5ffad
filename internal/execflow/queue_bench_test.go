package execflow_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/workflow"
)

// BenchmarkQueue queues a workflow of 1,000 jobs of `true` on a pool that
// has not started, as poolrun run does before the first command: reading
// the workflow (load) and queueing its jobs (queue), each per op of 1,000
// jobs.
func BenchmarkQueue(b *testing.B) {
	const jobs = 1000
	var wf strings.Builder
	wf.WriteString("jobs:\n")
	for i := range jobs {
		fmt.Fprintf(&wf, "  - {id: j%d, run: \"true\"}\n", i)
	}
	path := filepath.Join(b.TempDir(), "jobs.yaml")
	if err := os.WriteFile(path, []byte(wf.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Run("load", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := workflow.Load(path); err != nil {
				b.Fatal(err)
			}
		}
	})
	w, err := workflow.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("queue", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			b.StopTimer()
			p := engine.New(engine.InProcess(2), engine.OnEvent(func(engine.Event) {}))
			b.StartTimer()
			if _, err := execflow.Queue(p, w, execflow.Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
