package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/poolrun/poolrun/internal/atomicfile"
	"github.com/poolrun/poolrun/internal/regfile"
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
of the workers and of the totals. A bench report holds each run's figures
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

// maxReportSize bounds the report that poolrun report reads, 1 GiB: a
// report of a million jobs is about 400 MiB.
const maxReportSize = 1 << 30

// reportHead is how much of a file poolrun report reads before the rest:
// a file whose first bytes cannot begin a report is refused from them
// (see checkReportHead), not read whole.
const reportHead = 64 << 10

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
	rep, err := loadReport(in)
	if err != nil {
		return badInput(fmt.Errorf("poolrun report: %w", err))
	}
	var page bytes.Buffer
	if format == "trace" {
		if rep.pool == nil {
			return badInputf("poolrun report: --format trace: %s is a bench report, which holds no timeline to trace", in)
		}
		err = writeTrace(&page, rep.pool, filepath.Base(in))
	} else {
		err = rep.render(&page, filepath.Base(in))
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

// A loadedReport is a report read back: exactly one of pool and bench is
// set.
type loadedReport struct {
	pool  *report      // of scaffold or run
	bench *benchResult // of bench
}

// render writes the page of the report, read from the file named src.
func (l *loadedReport) render(w io.Writer, src string) error {
	if l.bench != nil {
		return renderBenchPage(w, l.bench, src)
	}
	return renderPoolPage(w, l.pool, src)
}

// Errors of loadReport, each wrapped with the file's name.
var (
	// errNotReport is returned when a file is JSON but not a report of
	// poolrun: neither a pool's (command, workers, jobs, totals) nor a
	// bench's (command "bench", results).
	errNotReport = errors.New("not a poolrun report")
	// errReportVersion is returned when a report's version is newer than
	// reportVersion (or not a version at all).
	errReportVersion = errors.New("unknown report version")
)

// loadReport reads and checks the report in file path: a regular file (a
// named pipe, a device or a directory is refused at once) of JSON of at
// most maxReportSize bytes, of a pool (version 0 to reportVersion) or of a
// bench. A file whose first reportHead bytes cannot begin a report is
// refused from them. The errors name the file.
func loadReport(path string) (*loadedReport, error) {
	data, err := readReport(path)
	var big *regfile.TooLargeError
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%s: no such file", path)
	case errors.As(err, &big):
		return nil, fmt.Errorf("%s: %d bytes, larger than %s: not a report of poolrun", path, big.Size, humanBytes(maxReportSize))
	case err != nil:
		return nil, err // names the path
	}
	return decodeReport(path, data)
}

// readReport reads the file at path whole, as regfile.ReadFile does with
// the limit maxReportSize, once its first reportHead bytes have passed
// checkReportHead.
func readReport(path string) ([]byte, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || fi.Size() > maxReportSize {
		f.Close()
		return regfile.ReadFile(path, maxReportSize) // refused by its size
	}
	head := make([]byte, reportHead)
	n, err := io.ReadFull(f, head)
	f.Close()
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, err // names the path
	}
	if err := checkReportHead(path, head[:n]); err != nil {
		return nil, err
	}
	return regfile.ReadFile(path, maxReportSize)
}

// checkReportHead refuses the file at path, whose first bytes are head,
// unless they could begin a report: a JSON object, whose tokens head
// holds without a syntax error up to where it ends.
func checkReportHead(path string, head []byte) error {
	dec := json.NewDecoder(bytes.NewReader(head))
	tok, err := dec.Token()
	if d, ok := tok.(json.Delim); err == nil && (!ok || d != '{') {
		return fmt.Errorf("%s: %w: not a JSON object", path, errNotReport)
	}
	for err == nil {
		_, err = dec.Token()
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return nil // the end of head, or of the file: read on
	}
	return fmt.Errorf("%s: %w: %v", path, errNotReport, jsonError(head, err))
}

// decodeReport checks data, the contents of the report file path (which
// the errors name), as loadReport does once it has read them.
func decodeReport(path string, data []byte) (*loadedReport, error) {
	// The fields that tell a pool's report from a bench's: present, not
	// only well typed.
	var probe struct {
		Version *json.RawMessage `json:"version"`
		Command string           `json:"command"`
		Workers *json.RawMessage `json:"workers"`
		Jobs    *json.RawMessage `json:"jobs"`
		Totals  *json.RawMessage `json:"totals"`
		Results *json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, errNotReport, jsonError(data, err))
	}
	version := 0
	if probe.Version != nil {
		if err := json.Unmarshal(*probe.Version, &version); err != nil || version < 0 {
			return nil, fmt.Errorf("%s: %w %s: want a whole number from 0 to %d", path, errReportVersion, *probe.Version, reportVersion)
		}
		if version > reportVersion {
			return nil, fmt.Errorf("%s: %w %d: this poolrun reads versions up to %d; a newer poolrun wrote it", path, errReportVersion, version, reportVersion)
		}
	}
	switch {
	case probe.Command == "bench" && probe.Results != nil:
		var b benchResult
		if err := json.Unmarshal(data, &b); err != nil {
			return nil, fmt.Errorf("%s: %w: a bench report, but %v", path, errNotReport, jsonError(data, err))
		}
		return &loadedReport{bench: &b}, nil
	case probe.Command != "" && probe.Workers != nil && probe.Jobs != nil && probe.Totals != nil:
		var r report
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("%s: %w: a pool's report, but %v", path, errNotReport, jsonError(data, err))
		}
		for i, j := range r.Jobs {
			if j == nil {
				return nil, fmt.Errorf("%s: %w: job %d of the list is null", path, errNotReport, i+1)
			}
		}
		return &loadedReport{pool: &r}, nil
	default:
		return nil, fmt.Errorf("%s: %w: it has no command, workers, jobs and totals (a pool's report) nor command \"bench\" and results (a bench's)", path, errNotReport)
	}
}

// jsonError says where in data a JSON error is, by line, where it can.
func jsonError(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	off := int64(-1)
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 || off > int64(len(data)) {
		return err
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	return fmt.Errorf("line %d: %w", line, err)
}
