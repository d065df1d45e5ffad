package workflow_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/workflow"
)

// benchSizes returns the table of workflow sizes, in jobs, that the
// benchmarks share: under -short the smallest alone. 100,000 jobs
// (workflow.MaxJobs) make a file of about 12 MB.
func benchSizes() []int {
	if testing.Short() {
		return []int{1_000}
	}
	return []int{1_000, 10_000, 100_000}
}

// bigWorkflow returns a valid workflow of n jobs, one entry each (no
// foreach), about 120 bytes a job, each but the first after the one
// before it.
func bigWorkflow(n int) []byte {
	var b bytes.Buffer
	b.WriteString("# a long workflow\njobs:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - id: step-%06d\n    run: ./step --in part-%06d.csv --out part-%06d.out --threads 2 --seed %d\n", i, i, i, i)
		if i > 0 {
			fmt.Fprintf(&b, "    after: [step-%06d]\n", i-1)
		}
	}
	return b.Bytes()
}

// yamlMistakes are the YAML errors of the benchmark: the last after line
// of a workflow indented one space too deep, or one too shallow. The YAML
// library names the line of the first, and for the second the line above
// the jobs list, far from the mistake.
var yamlMistakes = []struct {
	name, indent, msg string
}{
	{"deeper", "     after:", "mapping values are not allowed in this context"},
	{"shallower", "   after:", "did not find expected '-' indicator"},
}

// misindent returns data with the last after line indented as indent
// says, and the line's number.
func misindent(data []byte, indent string) ([]byte, int) {
	i := bytes.LastIndex(data, []byte("\n    after:"))
	bad := bytes.Clone(data[:i+1])
	bad = append(bad, indent...)
	bad = append(bad, data[i+1+len("    after:"):]...)
	return bad, bytes.Count(data[:i+1], []byte("\n")) + 1
}

// BenchmarkErrorLocation parses a valid workflow and the same workflow
// with a YAML error near its end, and reports how many times as long the
// second takes ("err/ok"): finding the line of a YAML error costs about
// one more parse of the file, not one parse per step of a search.
func BenchmarkErrorLocation(b *testing.B) {
	for _, n := range benchSizes() {
		ok := bigWorkflow(n)
		for _, mistake := range yamlMistakes {
			bad, line := misindent(ok, mistake.indent)
			want := fmt.Sprintf("big.yaml:%d: bad YAML: %s", line, mistake.msg)
			b.Run(fmt.Sprintf("jobs=%d/MB=%.1f/indent=%s", n, float64(len(ok))/1e6, mistake.name), func(b *testing.B) {
				b.ReportAllocs()
				var okTime, errTime time.Duration
				for b.Loop() {
					start := time.Now()
					if _, err := workflow.Parse("big.yaml", ok); err != nil {
						b.Fatal(err)
					}
					mid := time.Now()
					_, err := workflow.Parse("big.yaml", bad)
					errTime += time.Since(mid)
					okTime += mid.Sub(start)
					if err == nil || err.Error() != want {
						b.Fatalf("error %v, want %s", err, want)
					}
				}
				b.ReportMetric(float64(errTime)/float64(okTime), "err/ok")
			})
		}
	}
}

// TestBigWorkflow keeps the benchmark's inputs what it says they are.
func TestBigWorkflow(t *testing.T) {
	ok := bigWorkflow(3)
	w, err := workflow.Parse("big.yaml", ok)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Jobs) != 3 || strings.Join(w.Jobs[2].After, ",") != "step-000001" {
		t.Fatalf("jobs %+v", w.Jobs)
	}
	for _, mistake := range yamlMistakes {
		bad, line := misindent(ok, mistake.indent)
		want := fmt.Sprintf("big.yaml:10: bad YAML: %s", mistake.msg)
		if _, err := workflow.Parse("big.yaml", bad); err == nil || err.Error() != want || line != 10 {
			t.Errorf("%s: error %v, want %s (line %d)", mistake.name, err, want, line)
		}
	}
}
