package cli

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/poolrun/poolrun/internal/workflow"
	"github.com/spf13/pflag"
)

// listFlags are the flags of poolrun run that print what the workflow
// holds rather than run it: --list, its entries, and --list-ids, its
// job ids.
type listFlags struct {
	entries bool
	ids     bool
}

func (f *listFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.entries, "list", false, "print the entries of the workflow (those of the jobs TARGETs need): id as written, FILE:LINE, how many jobs, desc:; run nothing")
	fs.BoolVar(&f.ids, "list-ids", false, "print the ids of the jobs (those TARGETs need), one a line; run nothing (for scripts, and shell completion)")
}

// write prints what f asks for of wf.
func (f *listFlags) write(w io.Writer, wf *workflow.Workflow) error {
	if f.ids {
		var b bytes.Buffer
		for _, j := range wf.Jobs {
			b.WriteString(j.ID + "\n")
		}
		_, err := w.Write(b.Bytes())
		return err
	}
	return writeEntries(w, wf)
}

// writeEntries writes the job entries of wf, one a line in the order of
// the file, in aligned columns: the id as written, FILE:LINE, how many
// of wf's jobs it gives, and its desc if it has one.
//
//	split       wf.yaml:2  1 job   cut the input in parts
//	align-${i}  wf.yaml:4  4 jobs  align one part
func writeEntries(w io.Writer, wf *workflow.Workflow) error {
	type entry struct {
		id, desc string
		line     int
		jobs     int
	}
	var entries []*entry
	byLine := make(map[int]*entry)
	for _, j := range wf.Jobs {
		e := byLine[j.Line]
		if e == nil {
			e = &entry{id: j.EntryID, desc: j.Desc, line: j.Line}
			byLine[j.Line] = e
			entries = append(entries, e)
		}
		e.jobs++
	}
	// The jobs come in file order but that each follows those it runs
	// after.
	slices.SortFunc(entries, func(a, b *entry) int { return a.line - b.line })
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, e := range entries {
		jobs := "1 job"
		if e.jobs != 1 {
			jobs = fmt.Sprintf("%d jobs", e.jobs)
		}
		fmt.Fprintf(tw, "%s\t%s:%d\t%s\t%s\n", e.id, wf.File, e.line, jobs, e.desc)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// An entry without desc leaves the padding of the column before.
	for _, l := range bytes.SplitAfter(b.Bytes(), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		if _, err := w.Write(append(bytes.TrimRight(l, " \n"), '\n')); err != nil {
			return err
		}
	}
	return nil
}
