package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/poolrun/poolrun/internal/atomicfile"
	"github.com/poolrun/poolrun/internal/report"
)

const reportUsage = `Usage: poolrun report [-o PAGE.html] FILE.json
       poolrun report --format trace [-o TRACE.json] FILE.json

Turns the JSON report of a pool run (--report FILE.json of poolrun scaffold,
run or bench) into one HTML page that opens offline in any browser: no
network, no other file. For scaffold and run it draws a timeline per
worker: each job a bar coloured by its workflow entry or function, a
failed one outlined and marked (hover over a bar for the job's id,
function, labels, times and error); under it a bar per item the worker
built, from its build to its eviction, named and sized (hover for why it
went); then the worker's cache bytes over time and its resident memory
(for run, the sum of its running commands' peak memory); then the tables
of the totals, the workers, the jobs by workflow entry or function, the
jobs that did not succeed, and every job (sortable by id, start, duration
or peak RSS, without a script). A bench report holds each run's figures
but not its jobs nor samples over time: its page has one table per worker
count, a row per run, and says so.
`

const reportDetails = `The page goes to the PAGE.html of -o, by default beside the report, named
as it is with .html for .json (r.json: r.html); it is written whole or not
at all, over nothing but a regular file other than the report (a device, a
FIFO, a symbolic link is refused), and its path is printed. A file that is
not a poolrun report, or of a newer version than this poolrun reads, is
refused with exit status 2; one whose first 64 KiB cannot begin a report
is refused from them, however large it is.
docs/REPORT.md describes the report's fields.

--format trace writes the Chrome trace event format instead (by default to
FILE.trace.json), which https://ui.perfetto.dev and chrome://tracing open
for zoom and search: a process per worker, its job runs as complete events
on its "jobs" thread, its items as async spans, its cache bytes and memory
as counters (docs/REPORT.md says more). A bench report has no timeline to
trace.

Examples:
  poolrun scaffold --scale 0.2 -j 2 --report r.json && poolrun report r.json
  poolrun report --format trace r.json     # r.trace.json, for Perfetto
`

func runReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var out, format string
	fs := newFlagSet("report", reportUsage, reportDetails)
	fs.StringVarP(&out, "output", "o", "", "write the page to `PAGE.html` (default: FILE.json's name with .html, or .trace.json with --format trace)")
	fs.StringVar(&format, "format", "html", "what to write: `html` (the page) or trace (the Chrome trace event format, for Perfetto)")
	if err := parseFlags(fs, args, stdout); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	switch {
	case fs.NArg() == 0:
		return usageError(fs, "want one report file, got none")
	case fs.NArg() > 1:
		return usageError(fs, fmt.Sprintf("want one report file, got %q and %q", fs.Arg(0), fs.Arg(1)))
	case format != "html" && format != "trace":
		return usageError(fs, fmt.Sprintf("--format %s: want html or trace", format))
	}
	return makePage(fs.Arg(0), out, format, stdout)
}

// makePage reads the report in and writes its page (format "html") or
// its trace (format "trace") to out ("": in's name with .html, or
// .trace.json), then prints out's path.
func makePage(in, out, format string, stdout io.Writer) error {
	if out == "" {
		out = strings.TrimSuffix(in, ".json") + ".html"
		if format == "trace" {
			out = strings.TrimSuffix(in, ".json") + ".trace.json"
		}
	}
	if st, err := os.Stat(filepath.Dir(out)); err != nil || !st.IsDir() {
		return badInputf("poolrun report: -o %s: no folder %s to write it in", out, filepath.Dir(out))
	}
	if err := checkOwnFile("poolrun report: -o", out, keptFile{"the report itself", in}); err != nil {
		return err
	}
	rep, err := report.Load(in)
	if err != nil {
		return badInput(fmt.Errorf("poolrun report: %w", err))
	}
	var page bytes.Buffer
	if format == "trace" {
		if rep.Pool == nil {
			return badInputf("poolrun report: --format trace: %s is a bench report, which holds no timeline to trace", in)
		}
		err = report.WriteTrace(&page, rep.Pool, filepath.Base(in))
	} else {
		err = report.Render(&page, rep, filepath.Base(in))
	}
	if err != nil {
		return fmt.Errorf("poolrun report: %s: %w", in, err)
	}
	if err := atomicfile.Write(out, page.Bytes()); err != nil {
		return fmt.Errorf("poolrun report: writing the page: %w", err)
	}
	_, err = fmt.Fprintln(stdout, out)
	return err
}
