package report_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/poolrun/poolrun/internal/report"
)

// A report written, read back and drawn: the page shows a job's error
// holding markup as text.
func Example() {
	dir, _ := os.MkdirTemp("", "report-example-")
	defer os.RemoveAll(dir)
	start := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	end := start.Add(1500 * time.Millisecond)
	r := &report.Pool{
		Version: report.Version,
		Command: "run wf.yaml",
		Started: start,
		Workers: []report.Worker{{Index: 1, PID: 4242, Jobs: 1}},
		Jobs: []*report.Job{{
			ID: 1, Func: "poolrun.exec", Labels: map[string]string{"id": "clean"},
			Status: "failed", Worker: 1, Added: start, Started: &start, Ended: &end, Seconds: 1.5,
			Error: `exit status 1: <img src=x onerror=alert(1)>`,
		}},
	}
	path := filepath.Join(dir, "r.json")
	if err := report.Write(path, r); err != nil {
		fmt.Println(err)
		return
	}
	f, err := report.Load(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	var page strings.Builder
	if err := report.Render(&page, f, "r.json"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.Pool.Command, len(f.Pool.Jobs), "job")
	fmt.Println(strings.Contains(page.String(), "<img"), strings.Contains(page.String(), "&lt;img src=x"))
	// Output:
	// run wf.yaml 1 job
	// false true
}
