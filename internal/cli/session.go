package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/poolrun/poolrun/cluster"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/human"
	"github.com/poolrun/poolrun/internal/report"
	"github.com/poolrun/poolrun/internal/workflow"
)

// session runs one pool with progress display, job records and reports.
type session struct {
	flags  *poolFlags
	stderr io.Writer
	prog   *progress

	rec *report.Recorder // the report's records, from the pool's events

	// started is when run started the pool; samples its workers' series,
	// taken while it ran when a report is asked for (nil otherwise). Both
	// are set once run returns.
	mu       sync.Mutex
	started  time.Time
	samples  *report.Sampler
	listener *cluster.Listener // with --listen

	// inProcess makes the local workers (-j N, N > 0) goroutines of this
	// process (engine.InProcess) rather than worker processes: poolrun run,
	// whose jobs only wait on their commands.
	inProcess bool
	// summary, if set, is what finish prints in place of the table of the
	// workers: the end of poolrun run, given the pool's figures.
	summary func(engine.Stats)
}

// jobName names a job in a message: its workflow id where it has one,
// else its number.
func jobName(id int, labels map[string]string) string {
	if name, ok := labels[execflow.LabelID]; ok {
		return strconv.Quote(name)
	}
	return strconv.Itoa(id)
}

func newSession(f *poolFlags, stderr io.Writer) *session {
	return &session{flags: f, stderr: stderr, rec: report.NewRecorder()}
}

// options returns the pool's options; the listener feeds the records and
// the progress display.
func (s *session) options() []engine.Option {
	workers := engine.Workers(s.flags.workers())
	if n := s.flags.workers(); s.inProcess && n > 0 {
		workers = engine.InProcess(n)
	}
	opts := []engine.Option{
		workers,
		engine.WindowCapacity(s.flags.capacity),
		engine.OnEvent(s.event),
	}
	if s.flags.failFast {
		opts = append(opts, engine.FailFast())
	}
	if s.flags.retries > 0 {
		opts = append(opts, engine.Retries(s.flags.retries))
	}
	if s.flags.timeout > 0 {
		opts = append(opts, engine.Timeout(s.flags.timeout))
	}
	if s.listener != nil {
		opts = append(opts, s.listener.Option())
		if s.flags.jobs == 0 && !s.flags.serial {
			// -j 0 with --listen: no local worker, not the serial one.
			opts = append(opts, engine.RemoteOnly(max(s.flags.joinTimeout, time.Second)))
		}
	}
	return append(opts, s.flags.cache.options()...)
}

// listen starts the pool's server for remote workers, with --listen; the
// caller closes it with closeListener once the pool has run. The join
// file names outputs, the folders (absolute) where the jobs write, which a
// worker checks it can write in before it joins.
func (s *session) listen(outputs ...string) error {
	if s.flags.listen == "" {
		return nil
	}
	prog, err := hubProgram()
	if err != nil {
		return err
	}
	srv, err := cluster.StartHub(cluster.HubConfig{Program: prog, Addr: s.flags.listen, CertFile: s.flags.tlsCert, KeyFile: s.flags.tlsKey, Stderr: s.stderr})
	if err != nil {
		return badInput(fmt.Errorf("poolrun: --listen %s: %w", s.flags.listen, err))
	}
	l, err := cluster.Listen(srv, s.flags.joinFile, cluster.Outputs(outputs...))
	if err != nil {
		return badInput(fmt.Errorf("poolrun: --listen %s: %w", s.flags.listen, err))
	}
	s.listener = l
	fmt.Fprintf(s.stderr, "poolrun: workers may join with: poolrun worker --join-file %s\n", s.flags.joinFile)
	return nil
}

// hubEnv names the program that serves --listen, where it is not
// poolrun-hub next to this program or on PATH.
const hubEnv = "POOLRUN_HUB"

// hubProgram finds the program of the pool's server, which --listen
// starts: $POOLRUN_HUB, else poolrun-hub next to this program, else on
// PATH. The server is a program of its own so that every other poolrun
// run does not link it (package cluster/hub).
func hubProgram() (string, error) {
	if p := os.Getenv(hubEnv); p != "" {
		return p, nil
	}
	const name = "poolrun-hub"
	// LookPath of a path with a slash checks that it is an executable file.
	if exe, err := os.Executable(); err == nil {
		if p, err := exec.LookPath(filepath.Join(filepath.Dir(exe), name)); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", badInputf("poolrun: --listen needs %s, the pool's server, which is neither next to this program nor on PATH: install it with\n\tgo install github.com/poolrun/poolrun/cmd/%s@latest\nor name it with $%s", name, name, hubEnv)
}

// closeListener stops the server for remote workers and removes the join
// file.
func (s *session) closeListener() {
	if s.listener != nil {
		s.listener.Close()
	}
}

func (s *session) event(e engine.Event) {
	s.rec.Event(e)
	if s.prog != nil {
		s.prog.update(e)
	}
	if e.Kind != engine.JobStatus || e.Old != engine.Running || e.New != engine.Queued || e.Err == nil {
		return
	}
	// A job's run ended and it runs again: say so.
	if retry := retryLine(e); s.prog != nil {
		s.prog.printf("%s", retry)
	} else {
		fmt.Fprint(s.stderr, retry)
	}
}

// retryLine is the line that says that a job's run ended as e says and
// that the job runs again: the first line of the run's error (a
// command's error names its job already), and the next attempt's number.
func retryLine(e engine.Event) string {
	name := jobName(e.JobID, e.Labels)
	msg, _, _ := strings.Cut(e.Err.Error(), "\n")
	if !strings.HasPrefix(msg, "job "+name) {
		msg = "job " + name + ": " + msg
	}
	return fmt.Sprintf("poolrun: %s; running it again (attempt %d)\n", msg, e.Attempt+1)
}

// run runs p with the progress display, and returns the wall time and
// Run's error. When a report is asked for, it samples the workers' cache
// and memory while p runs (see sampler).
func (s *session) run(ctx context.Context, p *engine.Pool) (time.Duration, error) {
	if !s.flags.quiet {
		slots := s.flags.workers()
		if s.listener != nil {
			slots = maxWorkers // and those that join
		}
		var stats func() engine.Stats
		if s.listener != nil {
			stats = p.Stats // the status counts the workers by host
		}
		s.prog = newProgress(ctx, s.stderr, slots, stats)
	}
	start := time.Now()
	var smp *report.Sampler
	if s.flags.report != "" {
		smp = report.StartSampler(p.Stats, s.flags.workers() == 0, start)
	}
	err := p.Run(ctx)
	wall := time.Since(start)
	if errors.Is(err, engine.ErrNoWorkers) {
		err = fmt.Errorf("%w (start workers with: poolrun worker --join-file %s)", err, s.flags.joinFile)
	}
	if smp != nil {
		smp.Stop()
	}
	s.mu.Lock()
	s.started, s.samples = start, smp
	s.mu.Unlock()
	if s.prog != nil {
		s.prog.stop()
	}
	return wall, err
}

// finish reports a pool's end: the table or the summary (unless quiet),
// the JSON report (if asked), and the error to return.
func (s *session) finish(stdout io.Writer, command string, p *engine.Pool, runErr error, wall time.Duration, extra any) error {
	st := p.Stats()
	if !s.flags.quiet {
		if s.summary == nil {
			printTable(stdout, st, wall)
		}
		if b := s.rec.Budget(); b.Jobs > 0 {
			fmt.Fprintf(s.stderr, "poolrun: the items of %d job(s) alone took their worker's cache past --cache-budget %s (at most %s: job %d on worker %d)\n",
				b.Jobs, human.Bytes(int64(s.flags.cache.budget)), human.Bytes(b.MaxBytes), b.JobID, b.Worker)
		}
		if s.summary != nil {
			s.summary(st) // its last line is the verdict of a run that succeeded
		}
	}
	if s.flags.report != "" {
		if err := report.Write(s.flags.report, s.makeReport(command, st, wall, extra)); err != nil {
			return errors.Join(runErr, fmt.Errorf("poolrun: writing the report: %w", err))
		}
	}
	return runErr
}

// jobEnds returns how the jobs of workflow wf that the run queued (jobs)
// ended, in the workflow's order, once Run has returned and the recorder's NoteCommands
// has been called. An interrupted job's error in the report gets the line
// that names what its run removed of its outputs, which the pool did not
// hear (see execflow.Interrupted).
func (s *session) jobEnds(wf *workflow.Workflow, jobs map[string]*engine.Job[execflow.Result]) []jobEnd {
	var ends []jobEnd
	for _, j := range wf.Jobs {
		job := jobs[j.ID]
		if job == nil {
			continue
		}
		e := jobEnd{id: j.ID, status: job.Status()}
		_, err := job.Result()
		e.interrupted = e.status == engine.Aborted && errors.Is(err, context.Canceled)
		var removed string
		if e.interrupted {
			removed = execflow.Interrupted(wf.File, j.ID)
		}
		if e.status == engine.Failed || e.status == engine.Aborted {
			e.msg = failureMessage(wf, j, e.status, err, removed, len(job.Attempts()))
			e.line, e.reason = failureLine(wf, j, e.msg)
		}
		s.rec.Job(job.ID(), func(rec *report.Job) {
			e.seconds, e.peakRSS = rec.Seconds, rec.PeakRSS
			if removed != "" {
				rec.Error += "\n" + removed
			}
		})
		ends = append(ends, e)
	}
	return ends
}

// makeReport is the JSON report of the pool that ran, whose figures at
// the end are st.
func (s *session) makeReport(command string, st engine.Stats, wall time.Duration, extra any) *report.Pool {
	opts := report.Options{Workers: s.flags.workers(), Retries: s.flags.retries, TimeoutSeconds: s.flags.timeout.Seconds(),
		CacheSettings: s.flags.cache.settings()}
	s.mu.Lock()
	started, smp := s.started, s.samples
	s.mu.Unlock()
	return s.rec.Report(command, opts, st, started, wall, smp, extra)
}
