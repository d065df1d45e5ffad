package execflow

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// The fill colours of WriteDot's nodes.
const (
	dotRunColour  = "#f4a261" // orange: the job runs
	dotSkipColour = "#d9d9d9" // grey: it is skipped
)

// WriteDot writes the plan's job graph in the dot language of Graphviz, as
// `poolrun run --dag` prints it: a graph labelled with the workflow file
// and the counts, a box per job, labelled with its id and filled orange
// when the plan runs it or grey when it skips it, with "run: " or "skip: "
// and why ([Decision.Why]) as its tooltip; and an edge from each job to
// each job that runs after it, in the order of the workflow's jobs: a
// dashed one, with the input as its tooltip, where the dependency is
// inferred from an input that is the other job's output
// ([workflow.Job.Inferred]).
// Render it with, say, dot -Tsvg.
func (p *Plan) WriteDot(w io.Writer) error {
	bw := bufio.NewWriter(w)
	run, skip := p.Counts()
	fmt.Fprintf(bw, "digraph %s {\n", dotQuote(p.wf.File))
	fmt.Fprintf(bw, "\tgraph [rankdir=LR, labelloc=t, fontname=\"Helvetica\", label=%s];\n",
		dotQuote(fmt.Sprintf("%s: %d to run (orange), %d to skip (grey)", p.wf.File, run, skip)))
	fmt.Fprintf(bw, "\tnode [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];\n")
	for _, d := range p.Decisions {
		colour := dotSkipColour
		if d.Run {
			colour = dotRunColour
		}
		fmt.Fprintf(bw, "\t%s [fillcolor=%q, tooltip=%s];\n", dotQuote(d.Job.ID), colour, dotQuote(verb(d)+": "+d.Why()))
	}
	for _, d := range p.Decisions {
		for _, a := range d.Job.After {
			if in, ok := d.Job.Inferred[a]; ok {
				fmt.Fprintf(bw, "\t%s -> %s [style=dashed, tooltip=%s];\n", dotQuote(a), dotQuote(d.Job.ID),
					dotQuote("inferred: "+d.Job.ID+" reads "+in+", an output of "+a))
				continue
			}
			fmt.Fprintf(bw, "\t%s -> %s;\n", dotQuote(a), dotQuote(d.Job.ID))
		}
	}
	bw.WriteString("}\n")
	return bw.Flush()
}

// dotQuote returns s as a quoted string of the dot language: backslashes
// and double quotes escaped, line ends written \n.
func dotQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`)
	return `"` + r.Replace(s) + `"`
}
