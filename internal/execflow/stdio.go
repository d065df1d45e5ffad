package execflow

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/poolrun/poolrun/internal/workflow"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/sys/unix"

	"github.com/poolrun/poolrun/internal/pipecopy"
)

// Stdio says what becomes of what a workflow's job commands print on
// their standard output and error. The zero Stdio passes it on as it
// comes, through the engine (engine.JobOutput, engine.WorkerOutput), which
// writes whole lines. Item commands' output always passes on so.
type Stdio struct {
	// Tag prefixes each line a job's command prints, on standard output
	// and error alike, with "[ID] ", ID being the job's workflow id, so
	// that the lines of jobs that run at once can be told apart. A line
	// longer than 32 KiB is cut into tagged lines of that size at most,
	// and an unfinished last line is ended with a newline. Without Tag, a
	// command's output passes on byte for byte.
	Tag bool
	// LogDir, if not "", names an existing folder where each job's
	// command writes its standard output and standard error to files of
	// its own, ID.out and ID.err (ID as logName makes it safe for a
	// file name), rather than passing them on; Tag does not apply to
	// them. The files are created, or emptied, when the command starts
	// (so a job run again keeps the output of its last run only), with
	// mode 0666 less the umask; a symbolic link in their place is refused
	// and fails the job. A relative LogDir is taken relative to the
	// current folder when [Queue] is called.
	LogDir string
	// Echo writes each job's command, each of its lines after "[ID] ",
	// to the job's standard output (engine.JobOutput's, with LogDir too)
	// as the command starts, before anything it prints, as make echoes a
	// recipe.
	Echo bool
}

// resolve checks o and makes its LogDir absolute.
func (o Stdio) resolve() (Stdio, error) {
	if o.LogDir == "" {
		return o, nil
	}
	dir, err := filepath.Abs(o.LogDir)
	if err != nil {
		return o, fmt.Errorf("execflow: log folder %q: %w", o.LogDir, err)
	}
	if err := isDir(dir); err != nil {
		return o, fmt.Errorf("execflow: log folder: %w", err)
	}
	o.LogDir = dir
	return o, nil
}

// Where the bytes of a name come from in logName.
const (
	// logNameSafe are the bytes that logName keeps as they are (but a
	// leading dot): those of workflow ids but '/'.
	logNameSafe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:+=@"
	// maxLogName bounds the bytes of logName's result: with ".out" or
	// ".err" it stays within the 255 bytes of a file name.
	maxLogName = 200
)

// checkLogClaims refuses a workflow with an output that could name a job's
// log file in dir (Stdio.LogDir; "" for none), or the folder itself: a
// failed job's outputs are removed, and a log is no job's output.
func checkLogClaims(wf *workflow.Workflow, dir string) error {
	if dir == "" {
		return nil
	}
	names := make([]string, 0, 2*len(wf.Jobs)+len(wf.Workers))
	for _, j := range wf.Jobs {
		n := logName(j.ID)
		names = append(names, n+".out", n+".err")
	}
	for _, w := range wf.Workers {
		names = append(names, filepath.Base(programLog(dir, w.Name)))
	}
	if j, o := wf.Claims(dir, names...); j != nil {
		return fmt.Errorf("execflow: %s:%d: job %q: outputs %q can match the jobs' logs in %s (the log folder): a log is no job's output", wf.File, j.Line, j.ID, o, dir)
	}
	return nil
}

// logName returns the name of job id's log files in [Stdio.LogDir],
// before their ".out" and ".err": id itself when it is safe as a file
// name, as most workflow ids are. Otherwise every byte that is not an
// ASCII letter, a digit or one of _ - . : + = @ (a '/', say), and a
// leading '.', is written %XX in hexadecimal, as in a URL; a name that
// would still be longer than 200 bytes is cut to 183 and ends with '~'
// and 16 hexadecimal digits of a hash of id. Distinct ids give distinct
// names.
func logName(id string) string {
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		if strings.IndexByte(logNameSafe, c) < 0 || i == 0 && c == '.' {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	name := b.String()
	if name == "" {
		return "%" // no id is empty; no escaped name is "%" either
	}
	if len(name) > maxLogName {
		name = fmt.Sprintf("%s~%016x", name[:maxLogName-17], xxhash.Sum64String(id))
	}
	return name
}

// openLogs creates (or empties) the log files of job id in dir.
func openLogs(dir, id string) (stdout, stderr *os.File, err error) {
	base := filepath.Join(dir, logName(id))
	if stdout, err = openLog(base + ".out"); err != nil {
		return nil, nil, err
	}
	if stderr, err = openLog(base + ".err"); err != nil {
		stdout.Close()
		return nil, nil, err
	}
	return stdout, stderr, nil
}

func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o666)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("log file %s is a symbolic link: refusing to write through it", path)
	}
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	return f, nil
}

// maxLine bounds the bytes of a line, tag and newline included, that a
// lineCopy writes: a longer one is cut into pieces that fit (tagged lines
// of their own, when tagged). The engine passes lines of up to 64 KiB on
// whole.
const maxLine = 32 << 10

// minPiece is the least a cut line holds, however long the tag.
const minPiece = 1 << 10

// lineCopy copies a command's output stream, the read end of its pipe, to
// w: in whole lines, each prefixed with prefix, when prefix is not "";
// else byte for byte, in whole lines where it can (a line longer than
// maxLine goes in pieces). It keeps no more than maxLine bytes of a
// line. What it reads also goes to tail, if not nil.
type lineCopy struct {
	r      *os.File
	w      io.Writer
	prefix []byte
	tail   io.Writer
	c      *pipecopy.Copy // nil until started
	err    error          // the first error of w; read it once the copy has ended

	piece   int    // the most bytes of a line in one piece, prefix and newline aside
	partial []byte // the unfinished line
	batch   []byte // what one read of the pipe gives w
}

// newLineCopy makes a lineCopy to w, its lines prefixed with prefix, what
// it reads also going to tail if not nil; the caller gives it its pipe.
func newLineCopy(w io.Writer, prefix string, tail io.Writer) *lineCopy {
	c := &lineCopy{w: w, prefix: []byte(prefix), tail: tail}
	c.piece = max(maxLine-len(c.prefix)-1, minPiece)
	return c
}

// start starts the copy of c.r.
func (c *lineCopy) start() {
	c.c = pipecopy.Start(c.r, c.copy, c.finish)
}

// ownStdout returns stdout as a command's own standard output when it is
// a file already and nothing is to be prefixed: a log file, or a worker
// process's standard output, which the engine passes on in whole lines.
func ownStdout(stdout io.Writer, prefix string) (*os.File, bool) {
	f, ok := stdout.(*os.File)
	return f, ok && prefix == ""
}

// copy passes on the lines that p ends, after the unfinished line, and
// the pieces that a line too long makes; it keeps the rest, the new
// unfinished line.
func (c *lineCopy) copy(p []byte) {
	if c.tail != nil {
		c.tail.Write(p)
	}
	tagged := len(c.prefix) > 0
	c.batch = c.batch[:0]
	for len(p) > 0 {
		seg, ended := p, false
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			seg, ended, p = p[:i], true, p[i+1:]
		} else {
			p = nil
		}
		for len(c.partial)+len(seg) > c.piece {
			k := c.piece - len(c.partial)
			c.partial = append(c.partial, seg[:k]...)
			c.batch = c.line(c.batch, c.partial, tagged)
			c.partial, seg = c.partial[:0], seg[k:]
		}
		c.partial = append(c.partial, seg...)
		if ended {
			c.batch = c.line(c.batch, c.partial, true)
			c.partial = c.partial[:0]
		}
	}
	c.write(c.batch)
}

// finish passes on the unfinished line: ended with a newline when tagged.
func (c *lineCopy) finish() {
	if len(c.partial) > 0 {
		c.write(c.line(nil, c.partial, len(c.prefix) > 0))
	}
}

// line appends to out the line s, prefixed, and a newline if nl.
func (c *lineCopy) line(out, s []byte, nl bool) []byte {
	out = append(out, c.prefix...)
	out = append(out, s...)
	if nl {
		out = append(out, '\n')
	}
	return out
}

func (c *lineCopy) write(b []byte) {
	if len(b) == 0 {
		return
	}
	if _, err := c.w.Write(b); err != nil && c.err == nil {
		c.err = err
	}
}

// commandStreams are a command's standard output and error: the
// descriptors it gets, and the copies that pass on what it writes to
// pipes.
type commandStreams struct {
	stdout, stderr uintptr     // the command's
	writeEnds      []int       // the pipes' write ends, for the command alone
	pending        []*lineCopy // made, not started: their read ends
	copies         []*lineCopy
	closed         bool
}

// newCommandStreams makes the standard output and error of a command
// whose output goes to stdout and stderr, lines prefixed with prefix, and
// whose standard error also goes to tail. An untagged stdout that is a
// file already (a log file, a worker process's standard output, which
// the engine passes on in whole lines) is the command's own; anything
// else goes through a pipe that this process copies.
func newCommandStreams(stdout, stderr io.Writer, prefix string, tail io.Writer) (*commandStreams, error) {
	s := &commandStreams{}
	if f, ok := ownStdout(stdout, prefix); ok {
		s.stdout = f.Fd()
	} else {
		pw, err := s.pipe(stdout, prefix, nil)
		if err != nil {
			return nil, fmt.Errorf("standard output pipe: %w", err)
		}
		s.stdout = pw
	}
	pw, err := s.pipe(stderr, prefix, tail)
	if err != nil {
		s.close()
		return nil, fmt.Errorf("standard error pipe: %w", err)
	}
	s.stderr = pw
	return s, nil
}

// pipe makes a pipe whose read end is copied to w, and returns its write
// end. Only the read end is an os.File, in the runtime's poller: the
// write end is the command's, and this process only closes it.
func (s *commandStreams) pipe(w io.Writer, prefix string, tail io.Writer) (uintptr, error) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		return 0, os.NewSyscallError("pipe2", err)
	}
	// The command's end blocks: its file status flags were O_NONBLOCK
	// alone, which one fcntl clears.
	if _, err := unix.FcntlInt(uintptr(fds[1]), unix.F_SETFL, 0); err != nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		return 0, os.NewSyscallError("fcntl", err)
	}
	s.writeEnds = append(s.writeEnds, fds[1])
	c := newLineCopy(w, prefix, tail)
	c.r = os.NewFile(uintptr(fds[0]), "|0")
	s.pending = append(s.pending, c)
	return uintptr(fds[1]), nil
}

// started closes this process's write ends, now that the command has
// them (so that the copies end when the command's processes are gone),
// and starts the copies.
func (s *commandStreams) started() {
	s.closeWriteEnds()
	for _, c := range s.pending {
		c.start()
	}
	s.copies, s.pending = s.pending, nil
}

// wait waits for the end of the copies for at most grace; then they copy
// what their pipes hold and end (see pipecopy.Copy.End). It returns the
// first error of their writers.
func (s *commandStreams) wait(grace time.Duration) error {
	deadline := time.Now().Add(grace)
	var err error
	for _, c := range s.copies {
		c.c.End(deadline)
		if err == nil {
			err = c.err
		}
	}
	return err
}

// close closes this process's ends of the pipes. The copies end; call it
// after wait, or when the command did not start.
func (s *commandStreams) close() {
	if s.closed {
		return
	}
	s.closed = true
	s.closeWriteEnds()
	for _, c := range append(s.pending, s.copies...) {
		c.r.Close()
	}
}

func (s *commandStreams) closeWriteEnds() {
	for _, fd := range s.writeEnds {
		syscall.Close(fd)
	}
	s.writeEnds = nil
}
