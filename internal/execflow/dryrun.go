package execflow

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteText writes the plan as `poolrun run -n` prints it: one line per
// job, in the order of the workflow's jobs, with "run" or "skip", the
// job's id and why ([Decision.Why]), in aligned columns; then a line with
// the counts:
//
//	run   prepare  output data/clean.csv is missing
//	run   count-1  runs after prepare, which will run
//	skip  count-2  up to date
//	2 to run, 1 to skip
func (p *Plan) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, d := range p.Decisions {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", verb(d), d.Job.ID, d.Why())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	run, skip := p.Counts()
	_, err := fmt.Fprintf(w, "%d to run, %d to skip\n", run, skip)
	return err
}

// verb is "run" or "skip", what the plan does with a job.
func verb(d Decision) string {
	if d.Run {
		return "run"
	}
	return "skip"
}
