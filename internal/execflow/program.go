package execflow

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/procmem"
	"github.com/poolrun/poolrun/internal/workflow"
)

// Persistent worker programs (docs/WORKERS.md): a program of the
// workflow's workers is a cache item of the worker that runs its jobs, a
// member of the family programPrefix. Its build starts the program, its
// cleanup ends it, so that it lives, as every item does, while some
// unfinished job of the pool needs it (each of its jobs needs it). Its
// jobs are requests in Bazel's JSON worker protocol over its standard
// input and output. The items it holds in its memory are items of the
// family itemPrefix, as the workflow's other items, whose build and
// cleanup do nothing: the pool's window lists them as it lists any item,
// and the program frees them itself when the window no longer does.

const (
	// programPrefix is the prefix of the cachepool family of the
	// programs: program name + "@" + 16 hexadecimal digits.
	programPrefix = "poolrun.worker"
	// persistentFlag is what the program's command line gets, as Bazel
	// gives it to its workers.
	persistentFlag = "--persistent_worker"
	// programGrace is how long a program has to exit once its input has
	// ended, and then after SIGTERM, before SIGKILL.
	programGrace = 5 * time.Second
	// maxResponse bounds a response line.
	maxResponse = 64 << 20
)

// The environment of a program (docs/WORKERS.md).
const (
	programEnv  = "POOLRUN_PROGRAM"
	windowFDEnv = "POOLRUN_WINDOW_FD"
	itemKeysEnv = "POOLRUN_PROGRAM_ITEMS"
)

// programParam is everything a program's start depends on, as the parent
// computes it: the family parameter, and so the member's identity.
type programParam struct {
	Name      string
	Run       string // the workers entry's run, without persistentFlag
	Env       string // the entry's env, KEY=value entries joined by NUL
	Keys      string // the value of itemKeysEnv
	File      string
	Line      int
	Dir       string // absolute
	OptEnv    string // Options.Env joined by NUL
	TailLines int
	Stdio     Stdio // resolved
}

var programs = cachepool.DefineFamily(programPrefix, startProgram,
	cachepool.MemberName(programName),
	cachepool.Cleanup((*program).end),
)

// programName gives the program's name and a hash of the whole
// parameter.
func programName(p programParam) string {
	var h paramHash
	h.str(p.Name)
	h.str(p.Run)
	h.str(p.Env)
	h.str(p.Keys)
	h.str(p.File)
	h.num(p.Line)
	h.str(p.Dir)
	h.str(p.OptEnv)
	h.num(p.TailLines)
	h.str(strconv.FormatBool(p.Stdio.Tag))
	h.str(p.Stdio.LogDir)
	h.str(strconv.FormatBool(p.Stdio.Echo))
	return h.name(p.Name)
}

// programParams returns the parameter of every program of wf, by name,
// with the keys of the items each holds, as params names them.
func programParams(wf *workflow.Workflow, s settings, params map[string]itemParam) map[string]programParam {
	out := make(map[string]programParam, len(wf.Workers))
	env := strings.Join(s.env, "\x00")
	for _, w := range wf.Workers {
		var keys []string
		for _, it := range wf.Items {
			if it.Worker == w.Name {
				keys = append(keys, fmt.Sprintf("%s=%016x", it.Name, items.Item(params[it.Name]).Key()))
			}
		}
		out[w.Name] = programParam{
			Name: w.Name, Run: w.Run, Env: strings.Join(w.Env, "\x00"), Keys: strings.Join(keys, ","),
			File: wf.File, Line: w.Line, Dir: s.dir, OptEnv: env, TailLines: s.tail, Stdio: s.stdio,
		}
	}
	return out
}

// A program is a running persistent worker program.
type program struct {
	p      programParam
	pid    int
	g      *group
	owner  string        // its OwnerEnv mark's owner
	in     *os.File      // the write end of its standard input
	outF   *os.File      // the read end of its standard output
	out    *bufio.Reader // over outF
	logs   *os.File      // its log in Stdio.LogDir; nil if none
	script *os.File      // its command line, too long for an argument (forkRun); nil if none
	stderr *commandStreams
	tail   *tailWriter   // of its standard error
	exited chan struct{} // closed once it has exited (not reaped)

	mu     sync.Mutex // one request at a time; guards what follows
	broken bool       // a request failed: it is ended at its eviction
	reaped bool
	ws     syscall.WaitStatus
}

// errGone says that a program exited between two requests.
var errGone = errors.New("the program has exited")

// startProgram is the programs' build: it starts the program for the job
// of ctx's worker.
func startProgram(ctx context.Context, p programParam) (pr *program, err error) {
	env := commandEnv(p.OptEnv)
	if p.Env != "" {
		env = append(env, strings.Split(p.Env, "\x00")...)
	}
	env = append(env, programEnv+"="+p.Name, itemKeysEnv+"="+p.Keys)
	var win uintptr
	if f := engine.JobWindow(ctx); f != nil {
		win = f.Fd()
		env = append(env, windowFDEnv+"=3")
	}
	pr = &program{p: p, exited: make(chan struct{}), tail: newTailWriter(p.TailLines), g: &group{}, stderr: &commandStreams{}}
	pr.owner = markCommand(env)
	var inR, outW *os.File // the program's ends of its pipes (Close of nil does nothing)
	defer func() {
		inR.Close()
		outW.Close()
		if err != nil {
			pr.in.Close()
			pr.outF.Close()
			pr.closeFiles()
			err = fmt.Errorf("worker program %q (%s:%d): starting %q: %w", p.Name, p.File, p.Line, p.Run, err)
		}
	}()

	_, stderr := engine.JobOutput(ctx)
	prefix := ""
	if p.Stdio.Tag {
		prefix = "[worker " + p.Name + "] "
	}
	if p.Stdio.LogDir != "" {
		f, err := os.OpenFile(programLog(p.Stdio.LogDir, p.Name), os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o666)
		if err != nil {
			return nil, fmt.Errorf("log file: %w", err)
		}
		pr.logs, stderr, prefix = f, f, ""
	}
	errW, err := pr.stderr.pipe(stderr, prefix, pr.tail)
	if err != nil {
		return nil, err
	}
	if inR, pr.in, err = os.Pipe(); err != nil {
		return nil, err
	}
	if pr.outF, outW, err = os.Pipe(); err != nil {
		return nil, err
	}
	pr.out = bufio.NewReaderSize(pr.outF, 64<<10)
	files := []uintptr{inR.Fd(), outW.Fd(), errW}
	if win != 0 {
		files = append(files, win)
	}
	attr := &syscall.ProcAttr{Dir: p.Dir, Env: env, Files: files, Sys: sysProcAttr()}
	if pr.pid, pr.script, err = forkRun(p.Run+" "+persistentFlag, attr); err != nil {
		return nil, err
	}
	pr.stderr.started()
	pr.g.set(pr.pid)
	running.add(pr.pid)
	go func() {
		var exit exitWait
		exit.wait(pr.pid)
		close(pr.exited)
	}()
	return pr, nil
}

// programLog is the log file in dir of the program called name.
func programLog(dir, name string) string {
	return filepath.Join(dir, "worker-"+name+".log")
}

// closeFiles closes what pr holds besides its protocol's pipes.
func (pr *program) closeFiles() {
	pr.stderr.close()
	for _, f := range []*os.File{pr.logs, pr.script} {
		if f != nil {
			f.Close()
		}
	}
}

// The messages of Bazel's JSON worker protocol, and poolrun's field.
type (
	workRequest struct {
		Arguments []string     `json:"arguments"`
		RequestID int          `json:"requestId"`
		Poolrun   requestExtra `json:"poolrun"`
	}
	requestExtra struct {
		Job     string   `json:"job"`
		Attempt int      `json:"attempt"`
		Needs   []string `json:"needs"`
	}
	workResponse struct { // an absent field is 0 or ""
		ExitCode  int    `json:"exitCode"`
		Output    string `json:"output"`
		RequestID int    `json:"requestId"`
	}
)

// request sends the request of job a to pr and waits for the response,
// or for pr's end, or for ctx's. The outcome holds the response's exit
// code (a program that ended during the request: its exit status and the
// tail of its standard error); output is the response's. It returns
// errGone, having sent nothing, when pr had exited before. Any other
// error, and a program that ends during the request, breaks pr: its
// cleanup then ends it.
func (pr *program) request(ctx context.Context, a execArg, needs []string) (out shellOutcome, output string, err error) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	select {
	case <-pr.exited:
		pr.broken = true
		return out, "", errGone
	default:
	}
	args := a.Args
	if args == nil {
		args = []string{}
	}
	line, err := json.Marshal(workRequest{Arguments: args, Poolrun: requestExtra{Job: a.ID, Attempt: max(engine.JobAttempt(ctx), 1), Needs: needs}})
	if err != nil {
		return out, "", err
	}
	start := time.Now()
	stop := context.AfterFunc(ctx, func() {
		pr.in.SetWriteDeadline(time.Now())
		pr.outF.SetReadDeadline(time.Now())
	})
	defer stop()
	var resp []byte
	_, err = pr.in.Write(append(line, '\n'))
	if err == nil {
		resp, err = pr.readLine()
	}
	out.duration = time.Since(start)
	out.maxRSS = procmem.PeakRSSOf(pr.pid)
	if err != nil {
		pr.broken = true
		if ctx.Err() != nil {
			return out, "", fmt.Errorf("stopped: %w", context.Cause(ctx))
		}
		return pr.died(out), "", nil
	}
	var r workResponse
	if err := json.Unmarshal(resp, &r); err != nil || r.RequestID != 0 {
		pr.broken = true
		return out, "", fmt.Errorf("worker program %q (%s:%d): its response is not a WorkResponse with requestId 0: %s", pr.p.Name, pr.p.File, pr.p.Line, quoteLine(resp))
	}
	out.exitCode = r.ExitCode
	return out, r.Output, nil
}

// isBroken reports whether a request broke pr.
func (pr *program) isBroken() bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.broken
}

// readLine reads a response line, without its newline.
func (pr *program) readLine() ([]byte, error) {
	var line []byte
	for {
		part, err := pr.out.ReadSlice('\n')
		line = append(line, part...)
		switch {
		case err == nil:
			return bytes.TrimSuffix(line, []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			if len(line) > maxResponse {
				return nil, fmt.Errorf("worker program %q: a response of more than %d bytes", pr.p.Name, maxResponse)
			}
		case len(line) > 0 && errors.Is(err, io.EOF):
			return nil, fmt.Errorf("worker program %q: its output ended in the middle of a response: %s", pr.p.Name, quoteLine(line))
		default:
			return nil, err
		}
	}
}

// died waits for the end of pr, whose output ended or broke during a
// request, and says how it ended: as a command's exit status, with the
// tail of its standard error.
func (pr *program) died(out shellOutcome) shellOutcome {
	pr.wait(programGrace, programGrace)
	pr.reap()
	pr.stderr.wait(drainGrace)
	out.tail = pr.tail.String()
	if pr.ws.Signaled() {
		out.exitCode, out.signal = -1, signalName(pr.ws.Signal())
	} else if out.exitCode = pr.ws.ExitStatus(); out.exitCode == 0 {
		out.exitCode = 1 // it ended its work with the request unanswered
	}
	return out
}

// wait waits for pr's exit for grace, then sends its group SIGTERM, and
// SIGKILL term after that; pr.mu is held.
func (pr *program) wait(grace, term time.Duration) {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-pr.exited:
		return
	case <-t.C:
	}
	pr.g.term()
	t.Reset(term)
	select {
	case <-pr.exited:
	case <-t.C:
		pr.g.kill()
		<-pr.exited
	}
}

// reap reaps pr, which has exited; pr.mu is held.
func (pr *program) reap() {
	if pr.reaped {
		return
	}
	var ru syscall.Rusage
	pr.ws, _ = reap(pr.pid, &ru)
	pr.reaped = true
	running.remove(pr.pid)
}

// end is the programs' cleanup: it closes pr's input and waits for its
// exit for programGrace, then sends its group SIGTERM, and SIGKILL
// programGrace after that; then it ends what pr left (see runShell).
func (pr *program) end() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.in.Close()
	if !pr.reaped {
		// A broken program is in the middle of a request, or answers
		// garbage: it gets SIGTERM at once, and SIGKILL as a command
		// does.
		grace, term := programGrace, programGrace
		if pr.broken {
			grace, term = 0, killGrace
		}
		pr.wait(grace, term)
		pr.reap()
	}
	pr.g.stop()
	if pr.owner != "" {
		leftovers.end(pr.owner)
	}
	pr.stderr.wait(drainGrace)
	pr.outF.Close()
	pr.closeFiles()
}

// quoteLine quotes a line of a program's output for an error, cut to a
// readable length.
func quoteLine(b []byte) string {
	const most = 200
	if len(b) > most {
		return strconv.Quote(string(b[:most])) + "..."
	}
	return strconv.Quote(string(b))
}

// runRequest gets job a's program (starting it if its worker runs none,
// or again if it has exited since the last request) and sends it a's
// request.
func runRequest(ctx context.Context, a execArg) (shellOutcome, string, error) {
	it := programs.Item(*a.Program)
	for range 2 {
		pr, err := it.Get(ctx)
		if err != nil {
			return shellOutcome{}, "", err
		}
		out, output, err := pr.request(ctx, a, a.Held)
		if pr.isBroken() {
			key := it.Key()
			cachepool.FromContext(ctx).Evict(func(k uint64) bool { return k != key })
		}
		if err != errGone {
			return out, output, err
		}
	}
	return shellOutcome{}, "", fmt.Errorf("worker program %q (%s:%d) exited at once, twice", a.Program.Name, a.Program.File, a.Program.Line)
}

// sendRequest is runRequest with the response's output where a.Stdio
// says, as a command's standard output goes: to the job's output
// (engine.JobOutput), in whole lines tagged or not, or to its log in
// LogDir; the tail of it is kept for a job that failed.
func sendRequest(ctx context.Context, a execArg) (shellOutcome, error) {
	stdout, _ := engine.JobOutput(ctx)
	if a.Stdio.Echo {
		fmt.Fprintf(stdout, "[%s] %s %s\n", a.ID, a.Program.Name, strings.Join(a.Args, " "))
	}
	prefix := ""
	if a.Stdio.LogDir != "" {
		o, e, err := openLogs(a.Stdio.LogDir, a.ID)
		if err != nil {
			return shellOutcome{}, err
		}
		defer o.Close()
		e.Close()
		stdout = o
	} else if a.Stdio.Tag {
		prefix = "[" + a.ID + "] "
	}
	out, output, err := runRequest(ctx, a)
	if output != "" {
		if !strings.HasSuffix(output, "\n") {
			output += "\n"
		}
		tail := newTailWriter(a.TailLines)
		c := newLineCopy(stdout, prefix, tail)
		c.copy([]byte(output))
		c.finish()
		if out.exitCode != 0 {
			out.tail = tail.String()
		}
	}
	return out, err
}

// jobCommand is what a job runs, as the state file records it (hashed)
// so that a change reruns the job: its command, or, for a request, its
// program's command line, environment and name, and its args.
func jobCommand(wf *workflow.Workflow, j *workflow.Job) string {
	if j.Worker == "" {
		return j.Run
	}
	var b strings.Builder
	b.WriteString("\x00worker\x00" + j.Worker)
	for _, w := range wf.Workers {
		if w.Name == j.Worker {
			b.WriteString("\x00" + w.Run + "\x00" + strings.Join(w.Env, "\x00"))
		}
	}
	for _, a := range j.Args {
		b.WriteString("\x00" + strconv.Quote(a))
	}
	return b.String()
}
