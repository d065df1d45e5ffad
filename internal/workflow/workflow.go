package workflow

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/poolrun/poolrun/internal/regfile"
)

// ItemEnv is the environment variable that holds the path at which an
// item's run command builds the item.
const ItemEnv = "POOLRUN_ITEM"

// Limits on the size of a workflow after foreach expansion. They keep a
// mistyped range from exhausting memory before anything runs, and stay
// above what a machine's memory holds (bench/README.md, section 12, has
// what a job takes to plan).
const (
	// MaxJobs bounds the jobs in one workflow: 10 million.
	MaxJobs = 10_000_000
	// MaxDependencies bounds the after and needs entries of all jobs, both
	// as written (before duplicates are dropped) and, for after, once
	// patterns are expanded into the jobs they match.
	MaxDependencies = 10 * MaxJobs
	// MaxPaths bounds the inputs and outputs entries of all jobs, as
	// written and after foreach expansion.
	MaxPaths = 10 * MaxJobs
)

// MaxFileSize bounds the size of a workflow file that [Load] reads, 16 MiB:
// a larger file is refused from its size before it is read, or, if it
// grows while it is read, after MaxFileSize+1 bytes.
const MaxFileSize = 16 << 20

// A Workflow is a parsed, checked workflow file.
type Workflow struct {
	File string // the file name given to Parse or Load
	// Dir is the workflow's working folder, absolute: the folder of File,
	// or the one its workdir field names. The commands run there, and the
	// jobs' relative inputs and outputs and foreach globs are relative to
	// it. "" when it is unknown (File's folder could not be made absolute).
	Dir   string
	Items []*Item // in file order; nil if the file has none
	// Workers holds the persistent worker programs of the workers field,
	// in file order; nil if none.
	Workers []*Worker
	// Resources maps names of named resources to the most of each that
	// the running jobs take together, from the workflow's resources field;
	// nil if none. poolrun run's --resources wins, name by name. A
	// resource with a limit nowhere has none.
	Resources map[string]int64
	// Jobs holds every job after foreach expansion, in file order except
	// that each job comes after all the jobs it runs after (see the package
	// documentation). It is never empty in a Workflow from Parse.
	Jobs []*Job
}

// An Item is a per-worker artefact that jobs can need.
type Item struct {
	Name string // as written in the file; see [EnvName] for its variable
	Run  string // command for sh -c that builds the item at $POOLRUN_ITEM; "" for one held by a worker program
	// Worker is the name of the worker program (of [Workflow.Workers])
	// that holds the item in its memory, from the item's worker field;
	// "" for an item built by its run command.
	Worker string
	Line   int // line of the item's name
}

// An Entry is what the jobs of one entry of a workflow's jobs list
// share, each job pointing to it ([Job.Entry]).
type Entry struct {
	// Worker is the name of the worker program (of [Workflow.Workers])
	// that the entry's jobs are requests to, from its worker field; ""
	// for jobs that run a command.
	Worker string
	// Timeout is how long the job's command may run, from the entry's
	// timeout field; 0 if the entry has none (no limit of the job's own).
	// Running the workflow enforces it, not this package.
	Timeout time.Duration
	// Retries is how many more times the job's command is run when it
	// fails (exits non-zero or passes its timeout) or its worker dies,
	// from the entry's retries field; nil if the entry has none (then
	// poolrun run's --retries says). RetryDelay is the wait before each
	// new run, from retry_delay; 0 if none.
	Retries    *int
	RetryDelay time.Duration
	// Threads is the number of threads the command uses, which it counts
	// against poolrun run's -j, from the entry's threads field, 1 to
	// [MaxThreads]; 0 if the entry has none (it counts 1). Mem is the
	// memory it uses, in bytes, counted against --mem, from mem (see
	// [ParseSize]); 0 if none. Running the workflow enforces both.
	Threads int
	Mem     int64
	// Resources maps the names of the named resources the job takes (the
	// entry's resources field: resources: {gpu: 1}) to their amounts,
	// counted against the limits of poolrun run's --resources or the
	// workflow's own ([Workflow.Resources]); nil if none. The jobs of one
	// entry share it: do not modify it.
	Resources map[string]int64
	Line      int // line of the entry the job came from
	// EntryID is the id field of that entry as written, before any
	// ${...} is substituted ("align-${i}"); Desc its desc field, as
	// written, "" if none. Meant for listings (poolrun run --list).
	EntryID, Desc string
	// varNames holds the entry's foreach variables, in the order of its
	// foreach; nil without foreach. See [Job.Vars].
	varNames []string
}

// A Job is one command to run, after foreach expansion.
type Job struct {
	ID  string // unique in the workflow
	Run string // command for sh -c, with the values of variables substituted, each quoted as text for where it stands; "" for a request to a worker program
	// Args holds the request's arguments, from args, with the values of
	// variables substituted as they are (not quoted), for a job that is
	// a request to a worker program (Entry.Worker); nil for a job that
	// runs a command.
	Args []string
	// After holds the ids of the jobs that must succeed before this one
	// runs: patterns expanded, no duplicates, in file order. Nil if none.
	After []string
	// Needs holds the names of the items the job uses, without duplicates,
	// in the order written. Nil if none.
	Needs []string
	// Inputs and Outputs hold the entry's inputs and outputs fields, with
	// foreach values substituted and without duplicates, in the order
	// written: paths, or patterns with *, ? and [...] as in
	// [path/filepath.Match], relative to the folder of the workflow file
	// unless absolute. Nil if none. This package only reads them; running
	// the workflow decides from them which jobs to skip (see the package
	// documentation).
	Inputs  []string
	Outputs []string
	// Entry holds what the jobs of the job's entry share: its timeout,
	// retries, threads, mem, resources, line, id and desc as written.
	// Its fields are the job's: j.Timeout is j.Entry.Timeout. Never nil
	// in a Workflow from Parse; shared by the entry's jobs: do not
	// modify it.
	*Entry
	// varValues holds the job's values of its entry's foreach variables
	// (Entry.varNames), in that order; nil without foreach.
	varValues []string
	// Sources holds the inputs, as in Inputs, that are paths no job of
	// the workflow makes: no job has them as an output path or lies
	// above them as a folder output, and no output pattern of a job this
	// one runs after matches them. Running the workflow needs them to
	// exist. Nil if none.
	Sources []string
	// Inferred maps the id of each job in After that this one runs after
	// only because one of its inputs is that job's output (and not from
	// the after field) to that input, as in Inputs. Nil if none.
	Inferred map[string]string
}

// Parse reads a workflow from data and checks all of it: syntax, fields,
// foreach expansion, ids, items, dependencies, inputs and outputs. file
// names the data in errors and in [Workflow.File]. Any error is an
// [*Errors] that lists every mistake found (see there), each an [*Error].
func Parse(file string, data []byte) (*Workflow, error) {
	return ParseWith(file, data, Options{})
}

// ParseWith is [Parse] with the variables of opts (see [Options]); a
// mistake in them is reported as one of the file's, without a line.
func ParseWith(file string, data []byte, opts Options) (*Workflow, error) {
	p := &parser{file: file, set: opts.Set}
	if dir, err := filepath.Abs(filepath.Dir(file)); err == nil {
		p.dir = dir
	}
	w, err := p.parse(data)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Load reads and parses the workflow file at path, which must be a regular
// file: a named pipe (poolrun run <(generate), say), a device or a
// directory is refused at once, without waiting for a writer, with an
// error that names the path, says what it is and matches
// [regfile.ErrNotRegular]. If the file cannot be read Load returns the
// error of opening or reading it, which names the path; if it holds more
// than [MaxFileSize] bytes, an error that names the path, gives its size
// and the limit and matches [regfile.ErrTooLarge], having read nothing
// (or, had the file grown while read, MaxFileSize+1 bytes); otherwise it
// behaves as [Parse] with path as the file name.
func Load(path string) (*Workflow, error) {
	return LoadWith(path, Options{})
}

// LoadWith is [Load] with the variables of opts, as [ParseWith] takes
// them.
func LoadWith(path string, opts Options) (*Workflow, error) {
	data, err := regfile.ReadFile(path, MaxFileSize)
	var odd *regfile.NotRegularError
	switch {
	case errors.As(err, &odd) && odd.Mode.Type() == fs.ModeNamedPipe:
		// Not waited for: open(2) would wait for a writer where no signal
		// ends the wait. And a workflow's paths (its inputs and outputs,
		// its state file) are in its folder, which a pipe has not.
		return nil, fmt.Errorf("%w; write the workflow to a file first, and give that file", err)
	case err != nil:
		return nil, err
	}
	return ParseWith(path, data, opts)
}

// ItemByName returns the item called name, or nil if w has none.
func (w *Workflow) ItemByName(name string) *Item {
	for _, it := range w.Items {
		if it.Name == name {
			return it
		}
	}
	return nil
}

// Match returns the jobs of w whose ids match pattern, as [path.Match]
// takes it (a plain id matches itself), in the order of w.Jobs; none if
// no id matches. It fails only when pattern is malformed.
func (w *Workflow) Match(pattern string) ([]*Job, error) {
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, fmt.Errorf("workflow: bad pattern %q: %w", pattern, err)
	}
	var jobs []*Job
	for _, j := range w.Jobs {
		if ok, _ := path.Match(pattern, j.ID); ok {
			jobs = append(jobs, j)
		}
	}
	return jobs, nil
}

// EnvName returns the environment variable in which a job that needs the
// named item finds the item's path: "POOLRUN_ITEM_" followed by the name in
// upper case, with every character other than A-Z and 0-9 replaced by '_'.
// EnvName("ref-2") is "POOLRUN_ITEM_REF_2".
func EnvName(item string) string {
	var b strings.Builder
	b.Grow(len(ItemEnv) + 1 + len(item))
	b.WriteString(ItemEnv)
	b.WriteByte('_')
	for _, r := range item {
		switch {
		case 'a' <= r && r <= 'z':
			b.WriteRune(r - 'a' + 'A')
		case 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// validItemName reports whether name is a letter or digit followed by
// letters, digits, '_', '-' and '.'.
func validItemName(name string) bool {
	if name == "" || !isAlnum(name[0]) {
		return false
	}
	for i := 1; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '_' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// idPunct lists the characters other than letters and digits allowed in a
// job id. None of them means anything to path.Match.
const idPunct = "_-./:+=@"

// validID reports whether id is a valid job id.
func validID(id string) bool {
	if id == "" {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !isAlnum(c) && strings.IndexByte(idPunct, c) < 0 {
			return false
		}
	}
	return true
}

// validVar reports whether name is a valid foreach variable name: a
// lower-case letter followed by lower-case letters, digits and '_'.
func validVar(name string) bool {
	if name == "" || !('a' <= name[0] && name[0] <= 'z') {
		return false
	}
	for i := 1; i < len(name); i++ {
		if c := name[i]; !('a' <= c && c <= 'z') && !('0' <= c && c <= '9') && c != '_' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// Vars returns a new map of each foreach variable of the job's entry to
// its value for this job; nil if the entry has no foreach.
func (j *Job) Vars() map[string]string {
	if j.Entry == nil || j.varNames == nil {
		return nil
	}
	m := make(map[string]string, len(j.varNames))
	for i, n := range j.varNames {
		m[n] = j.varValues[i]
	}
	return m
}
