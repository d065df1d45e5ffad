package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/cluster"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/atomicfile"
	"github.com/poolrun/poolrun/internal/execflow"
)

// poolFlags are the flags every command that runs a pool takes.
type poolFlags struct {
	jobs        int
	serial      bool
	failFast    bool
	capacity    int
	quiet       bool
	report      string
	retries     int
	timeout     time.Duration
	cache       cacheFlags
	listen      string // address of the pool's server for remote workers; "" none
	joinFile    string
	joinTimeout time.Duration
	tlsCert     string // with --listen: the server's own certificate and key
	tlsKey      string
}

// register registers the flags of a command that runs one pool: -j,
// --serial, the common ones and the cache flags.
func (f *poolFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.jobs, "j", runtime.NumCPU(), fmt.Sprintf("number of worker `processes`, 0 to %d, at most the number of jobs (0: as --serial)", maxWorkers))
	fs.BoolVar(&f.serial, "serial", false, "run the jobs one by one in this process (same results, no workers; same as -j 0)")
	fs.StringVar(&f.listen, "listen", "", "let workers join from elsewhere (poolrun worker) through a server on `HOST:PORT` (TLS, with the pool's own certificates, unless on loopback); needs --join-file. Output folders must be on storage every host sees, at the same path: a worker that cannot write there is refused")
	fs.StringVar(&f.joinFile, "join-file", "", "with --listen: write what a worker needs to join (address, credential, TLS trust, output folders) to `FILE`, mode 0600")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "with --listen: the server presents the certificate of `FILE` (PEM, then any intermediates; it must cover the --listen host), over TLS even on loopback, instead of one made for the pool; the join file carries it for the workers to trust")
	fs.StringVar(&f.tlsKey, "tls-key", "", "with --tls-cert: the certificate's private key, `FILE` (PEM)")
	f.joinTimeout = 2 * time.Minute
	fs.Var((*durationFlag)(&f.joinTimeout), "join-timeout", "with --listen and -j 0 (no local worker): give up when no worker has been there for `D`")
	f.registerCommon(fs)
	f.cache.register(fs)
}

// registerCommon registers the flags that every command running pools
// takes. poolrun bench takes only these, and sets the worker counts and the
// cache options itself, per run.
func (f *poolFlags) registerCommon(fs *flag.FlagSet) {
	fs.BoolVar(&f.failFast, "fail-fast", false, "stop at the first failed job: start no other job")
	fs.IntVar(&f.capacity, "capacity", 1000, fmt.Sprintf("`slots` of the window of required items, 1 to %d (more items than slots: workers keep everything)", maxCapacity))
	fs.BoolVar(&f.quiet, "quiet", false, "print no progress and no summary table")
	fs.StringVar(&f.report, "report", "", "write a JSON report of every job and worker to `FILE`")
	fs.IntVar(&f.retries, "retries", 0, fmt.Sprintf("run a job again, up to `N` more times (0 to %d), when its worker dies under it; a job that fails is not retried", maxRetries))
	fs.Var((*durationFlag)(&f.timeout), "timeout", "fail a job that runs longer than `D` (a duration: 90s, 10m, 1h30m; 0: no limit); its worker is replaced if it does not stop within 5s")
}

// durationFlag is a flag of type time.Duration whose error says what a
// duration looks like.
type durationFlag time.Duration

func (d *durationFlag) String() string { return time.Duration(*d).String() }

func (d *durationFlag) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a duration with its unit, such as 90s, 10m or 1h30m")
	}
	*d = durationFlag(v)
	return nil
}

// maxRetries bounds --retries: a job that kills its worker more often than
// that is not worth running again.
const maxRetries = 100

// maxWorkers bounds -j (and bench's worker counts): each worker is a
// process with a Go runtime of its own, about 10 MiB before any item, so
// that a mistyped -j 100000 would start a process per job of a large
// workflow.
const maxWorkers = 4096

// maxCapacity is the most slots a window may have: the maximum of package
// shm (its maxCapacity), which refuses larger windows when the pool starts.
const maxCapacity = 1 << 24

// check checks the flags that register registers. -j 0 means serial, as
// --serial does, so the two together agree.
func (f *poolFlags) check() error {
	if f.jobs < 0 || f.jobs > maxWorkers {
		return badInputf("poolrun: -j %d: want a number of workers from 1 to %d (or 0: serial, as --serial)", f.jobs, maxWorkers)
	}
	if err := checkListen(f.listen, f.joinFile); err != nil {
		return err
	}
	if err := checkTLSFlags(f.listen, f.tlsCert, f.tlsKey); err != nil {
		return err
	}
	return f.checkCommon()
}

// checkCommon checks the flags that registerCommon registers: the
// capacity's range, and that the report can be written where it is asked
// for (see checkReportPath), so that a mistyped path or a folder that
// cannot be written is refused before the pool runs rather than after.
func (f *poolFlags) checkCommon() error {
	if f.capacity < 1 || f.capacity > maxCapacity {
		return badInputf("poolrun: --capacity %d: want a number of slots from 1 to %d", f.capacity, maxCapacity)
	}
	if f.retries < 0 || f.retries > maxRetries {
		return badInputf("poolrun: --retries %d: want a number of retries from 0 to %d", f.retries, maxRetries)
	}
	if f.timeout < 0 {
		return badInputf("poolrun: --timeout %v: want a duration of 0 (no limit) or more", f.timeout)
	}
	if f.report != "" {
		return checkReportPath(f.report)
	}
	return nil
}

// checkReportPath refuses a --report path that could not be written when
// the pool has run: one whose folder is missing or not a folder, one that
// is a folder, and one in whose folder no file can be made (a read-only
// folder or file system, a name too long). The last is tried for real: a
// file of the shape of the temporary file that the report is written
// through (see writeReport) is made in the folder and removed, since
// asking access(2) would tell root yes where the write then fails.
func checkReportPath(path string) error {
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return badInputf("poolrun: --report %s: no folder %s to write it in", path, dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return badInputf("poolrun: --report %s: is a folder; want a file name", path)
	}
	probe, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the probe's name would only confuse
		}
		return badInputf("poolrun: --report %s: cannot write a file in %s: %v", path, dir, err)
	}
	probe.Close()
	if err := os.Remove(probe.Name()); err != nil {
		return fmt.Errorf("poolrun: --report %s: %w", path, err)
	}
	return nil
}

// capWorkers lowers -j to n, the number of jobs queued before the pool
// starts: the pool never runs more workers than it has jobs (it starts
// them as jobs need them, see engine.Workers), and the report and the
// progress display then say how many it could run. n < 1 changes
// nothing.
func (f *poolFlags) capWorkers(n int) {
	if n >= 1 && f.jobs > n {
		f.jobs = n
	}
}

// workers is the number of worker processes: 0 for serial (--serial or
// -j 0).
func (f *poolFlags) workers() int {
	if f.serial {
		return 0
	}
	return f.jobs
}

// session runs one pool with progress display, job records and reports.
type session struct {
	flags  *poolFlags
	stderr io.Writer
	prog   *progress

	mu     sync.Mutex
	jobs   map[int]*jobRecord
	budget budgetExceeded

	// started is when run started the pool; samples its workers' series,
	// taken while it ran when a report is asked for (nil otherwise). Both
	// are set once run returns.
	started  time.Time
	samples  *sampler
	listener *cluster.Listener // with --listen

	// inProcess makes the local workers (-j N, N > 0) goroutines of this
	// process (engine.InProcess) rather than worker processes: poolrun run,
	// whose jobs only wait on their commands.
	inProcess bool
}

// budgetExceeded sums the BudgetExceeded events of a pool.
type budgetExceeded struct {
	// Jobs counts the jobs whose own items took their worker past the
	// budget (--cache-budget); 0 without a budget.
	Jobs int `json:"jobs"`
	// MaxBytes is the most a worker's cache held when it was past the
	// budget; Worker and JobID say where and when (0 if Jobs is 0).
	MaxBytes int64 `json:"max_bytes"`
	Worker   int   `json:"worker"`
	JobID    int   `json:"job"`
}

// jobRecord is what the report says of one job, gathered from events.
// Attempts lists its runs when there were more than one (--retries).
type jobRecord struct {
	// ID numbers the job in its pool, from 1, in the order it was queued.
	ID int `json:"id"`
	// Func is the name of the job's registered function, as
	// "scaffold.connect" or "poolrun.exec" (a workflow's command).
	Func string `json:"func"`
	// Labels are the job's labels: a workflow job's id is under "id".
	Labels map[string]string `json:"labels,omitempty"`
	// Status is how the job ended: succeeded, failed, cancelled, aborted
	// or skipped; pending, queued or running if the pool stopped first.
	Status string `json:"status"`
	// Worker is the worker (from 1; 1 in serial mode) that last ran it;
	// omitted if it never ran.
	Worker int `json:"worker,omitempty"`
	// Added is when it was queued; Started when its last run was sent to
	// its worker, Ended when it ended (each omitted if it never did).
	Added   time.Time  `json:"added"`
	Started *time.Time `json:"started,omitempty"`
	Ended   *time.Time `json:"ended,omitempty"`
	// Seconds is Ended less Started: how long its last run took.
	Seconds float64 `json:"seconds,omitempty"`
	// Error is why it failed, was cancelled or aborted.
	Error string `json:"error,omitempty"`
	// Attempts lists every run of a job that ran more than once, in
	// order, the last included; omitted for a job that ran at most once.
	Attempts []attemptRecord `json:"attempts,omitempty"`
}

// jobName names a job in a message: its workflow id where it has one,
// else its number.
func jobName(id int, labels map[string]string) string {
	if name, ok := labels[execflow.LabelID]; ok {
		return strconv.Quote(name)
	}
	return strconv.Itoa(id)
}

// attemptRecord is one run of a job that ran more than once.
type attemptRecord struct {
	Worker  int       `json:"worker"`  // the worker it ran on, from 1
	Started time.Time `json:"started"` // when it was sent to that worker
	Ended   time.Time `json:"ended"`   // when it ended
	// Status is how the run ended: aborted for one that was run again
	// (its worker died), else the job's status.
	Status string `json:"status"`
	Error  string `json:"error,omitempty"` // why it did not succeed
}

func newSession(f *poolFlags, stderr io.Writer) *session {
	return &session{flags: f, stderr: stderr, jobs: map[int]*jobRecord{}}
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
	opts := []cluster.ServerOption{cluster.Outputs(outputs...)}
	if s.flags.tlsCert != "" {
		opts = append(opts, cluster.TLSFiles(s.flags.tlsCert, s.flags.tlsKey))
	}
	l, err := cluster.Listen(s.flags.listen, s.flags.joinFile, opts...)
	if err != nil {
		return badInput(fmt.Errorf("poolrun: --listen %s: %w", s.flags.listen, err))
	}
	s.listener = l
	fmt.Fprintf(s.stderr, "poolrun: workers may join with: poolrun worker --join-file %s\n", s.flags.joinFile)
	return nil
}

// closeListener stops the server for remote workers and removes the join
// file.
func (s *session) closeListener() {
	if s.listener != nil {
		s.listener.Close()
	}
}

func (s *session) event(e engine.Event) {
	var retry string // a job's worker died and it runs again: say so
	s.mu.Lock()
	switch e.Kind {
	case engine.JobAdded:
		s.jobs[e.JobID] = &jobRecord{ID: e.JobID, Func: e.Func, Labels: e.Labels, Status: e.New.String(), Added: e.Time}
	case engine.JobStatus:
		r := s.jobs[e.JobID]
		if r == nil {
			break
		}
		r.Status = e.New.String()
		t := e.Time
		if e.New == engine.Running {
			r.Started, r.Worker = &t, e.Worker
		}
		if e.Old == engine.Running && e.New == engine.Queued && e.Err == nil {
			// Taken back before it started (sent ahead to a worker that
			// left, or revoked for an idle one): not a run.
			r.Started, r.Worker = nil, 0
			break
		}
		if e.Old == engine.Running && (e.New == engine.Queued || e.New.Done() && len(r.Attempts) > 0) {
			// A run that is retried, or the last of a job that was.
			a := attemptRecord{Worker: e.Worker, Ended: t, Status: e.New.String()}
			if r.Started != nil {
				a.Started = *r.Started
			}
			if e.New == engine.Queued {
				a.Status = engine.Aborted.String()
			}
			if e.Err != nil {
				a.Error = e.Err.Error()
			}
			r.Attempts = append(r.Attempts, a)
			if e.New == engine.Queued {
				retry = fmt.Sprintf("poolrun: job %s: %v; running it again (attempt %d)\n", jobName(e.JobID, e.Labels), e.Err, e.Attempt+1)
			}
		}
		if e.New.Done() {
			r.Ended = &t
			if r.Started != nil {
				r.Seconds = t.Sub(*r.Started).Seconds()
			}
			if e.Err != nil {
				r.Error = e.Err.Error()
			}
		}
	case engine.BudgetExceeded:
		s.budget.Jobs++
		if e.CacheBytes > s.budget.MaxBytes {
			s.budget.MaxBytes, s.budget.Worker, s.budget.JobID = e.CacheBytes, e.Worker, e.JobID
		}
	}
	s.mu.Unlock()
	if s.prog != nil {
		s.prog.update(e)
	}
	switch {
	case retry == "":
	case s.prog != nil:
		s.prog.printf("%s", retry)
	default:
		fmt.Fprint(s.stderr, retry)
	}
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
	var smp *sampler
	if s.flags.report != "" {
		smp = startSampler(p.Stats, s.flags.workers() == 0, start)
	}
	err := p.Run(ctx)
	wall := time.Since(start)
	if errors.Is(err, engine.ErrNoWorkers) {
		err = fmt.Errorf("%w (start workers with: poolrun worker --join-file %s)", err, s.flags.joinFile)
	}
	if smp != nil {
		smp.stop()
	}
	s.mu.Lock()
	s.started, s.samples = start, smp
	s.mu.Unlock()
	if s.prog != nil {
		s.prog.stop()
	}
	return wall, err
}

// reportVersion is the version of the JSON report that this poolrun
// writes, and the newest that poolrun report reads: 1 added version,
// started, sample_seconds and the workers' samples. A report without a
// version is of version 0 (poolrun report draws it without samples).
// docs/REPORT.md describes every field.
const reportVersion = 1

// report is the JSON report of a command that runs one pool (scaffold,
// run); poolrun bench writes a benchResult instead.
type report struct {
	// Version is reportVersion: a reader refuses a version it does not
	// know.
	Version int `json:"version"`
	// Command is the command that ran: "scaffold", or "run FILE".
	Command string `json:"command"`
	// Started is when the pool started running: time 0 of the samples.
	Started time.Time `json:"started"`
	// SampleSeconds is the time between two samples at the end of the run
	// (0.1 s, doubled each time the series were halved; see sampler).
	SampleSeconds float64        `json:"sample_seconds"`
	Options       poolSettings   `json:"options"` // the options the pool ran with
	Workers       []workerReport `json:"workers"` // one per worker place, in order
	Jobs          []*jobRecord   `json:"jobs"`    // every job, by ID
	Totals        totals         `json:"totals"`  // the pool's figures
	// Extra is the command's own result (scaffold: the cells, connections
	// and checksum of its output); omitted if it has none or failed.
	Extra any `json:"result,omitempty"`
}

// poolSettings are the options a pool ran with, as a report states them.
type poolSettings struct {
	Workers        int     `json:"workers"`                   // -j; 0: serial
	Retries        int     `json:"retries,omitempty"`         // --retries
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"` // --timeout; 0: none
	cacheSettings
}

// workerReport is what a report says of one worker place: the worker
// process that holds it and those that held it before (a worker that dies
// is replaced in its place).
type workerReport struct {
	Index int `json:"index"` // the place's number, from 1
	PID   int `json:"pid"`   // its current (or last) process, on Host
	// Host is the name of the host its process runs on: the pool's own
	// for local workers, the one a remote worker gave when it joined
	// (poolrun worker). Omitted where unknown.
	Host     string `json:"host,omitempty"`
	Jobs     int    `json:"jobs"`     // the jobs its processes ran
	Restarts int    `json:"restarts"` // the processes that replaced one that died
	// Samples are the worker's cache bytes and resident memory over time,
	// and the items it built and evicted between samples, taken every
	// sample_seconds (or less, early in the run) while the pool ran and
	// once at its end. Omitted in bench reports.
	Samples []sample `json:"samples,omitempty"`
	// StaleEvictions counts the items evicted while the pool ran, by its
	// policy; BudgetEvictions those evicted to stay within the cache
	// budget; cache.evictions counts both and the clear at the end.
	StaleEvictions  uint64 `json:"stale_evictions"`
	BudgetEvictions uint64 `json:"budget_evictions"`
	// PeakRSS is the largest peak resident memory of the place's
	// processes (VmHWM; 0 where unknown; in serial mode this process's).
	PeakRSS int64       `json:"peak_rss_bytes"`
	Cache   cacheReport `json:"cache"`
}

// cacheReport is cachepool.Stats as the report spells it, summed over a
// place's processes.
type cacheReport struct {
	Hits      uint64 `json:"hits"`      // items found in the cache
	Builds    uint64 `json:"builds"`    // items built
	Evictions uint64 `json:"evictions"` // items evicted, the clear at the end included
	Resident  int    `json:"resident"`  // items held at the end
	Bytes     int64  `json:"bytes"`     // bytes held at the end
	// PeakBytes is the most the cache held at once (the largest over the
	// place's processes).
	PeakBytes        int64   `json:"peak_bytes"`
	BuildTimeSeconds float64 `json:"build_seconds"` // time spent building items
}

// reportWorker is one worker's entry of a report.
func reportWorker(w engine.WorkerStats) workerReport {
	return workerReport{Index: w.Index, PID: w.PID, Host: workerHost(w), Jobs: w.Jobs, Restarts: w.Restarts,
		StaleEvictions: w.Evicted, BudgetEvictions: w.BudgetEvicted, PeakRSS: w.PeakRSS, Cache: cacheOf(w.Cache)}
}

func cacheOf(s cachepool.Stats) cacheReport {
	return cacheReport{Hits: s.Hits, Builds: s.Builds, Evictions: s.Evictions, Resident: s.Resident,
		Bytes: s.Bytes, PeakBytes: s.PeakBytes, BuildTimeSeconds: s.BuildTime.Seconds()}
}

// totals are a report's figures for the whole pool.
type totals struct {
	Jobs int `json:"jobs"` // every job queued
	// ByStatus counts the jobs by status, omitting statuses of none.
	ByStatus    map[string]int `json:"by_status"`
	WallSeconds float64        `json:"wall_seconds"` // from the pool's start to its end
	// Builds, Hits and Evictions sum the workers' cache counters.
	Builds    uint64 `json:"builds"`
	Hits      uint64 `json:"hits"`
	Evictions uint64 `json:"evictions"`
	// StaleEvictions: the workers' evictions while the pool ran, by the
	// policy; BudgetEvictions: those to stay within the cache budget.
	StaleEvictions  uint64 `json:"stale_evictions"`
	BudgetEvictions uint64 `json:"budget_evictions"`
	// PeakBytes is the sum of the workers' own cache peaks (what they
	// would hold if their peaks coincided); SummedPeakBytes is the peak
	// over time of what they held together (what the host needed).
	PeakBytes       int64 `json:"peak_cache_bytes"`
	SummedPeakBytes int64 `json:"summed_peak_bytes"`
	// StaleByteSeconds is the integral over time of the bytes held in
	// items that no unfinished job needed.
	StaleByteSeconds float64 `json:"stale_byte_seconds"`
	// PeakRSS sums the workers' peak resident memory.
	PeakRSS int64 `json:"peak_rss_bytes"`
	// BudgetExceeded sums the jobs whose own items took their worker's
	// cache past the budget.
	BudgetExceeded budgetExceeded `json:"budget_exceeded"`
	// Publishes counts the window publishes that changed a required set.
	Publishes uint64 `json:"window_publishes"`
}

func (s *session) makeReport(command string, st engine.Stats, wall time.Duration, extra any) *report {
	r := &report{Version: reportVersion, Command: command, Extra: extra,
		Options: poolSettings{Workers: s.flags.workers(), Retries: s.flags.retries, TimeoutSeconds: s.flags.timeout.Seconds(),
			cacheSettings: s.flags.cache.settings()}}
	s.mu.Lock()
	for _, j := range s.jobs {
		r.Jobs = append(r.Jobs, j)
	}
	r.Totals.BudgetExceeded = s.budget
	r.Started = s.started
	smp := s.samples
	s.mu.Unlock()
	if smp != nil {
		r.SampleSeconds = smp.interval.Seconds()
	}
	sort.Slice(r.Jobs, func(a, b int) bool { return r.Jobs[a].ID < r.Jobs[b].ID })
	r.Totals.Jobs, r.Totals.ByStatus, r.Totals.WallSeconds, r.Totals.Publishes = len(r.Jobs), map[string]int{}, wall.Seconds(), st.Publishes
	for i, n := range st.Counts {
		if n > 0 {
			r.Totals.ByStatus[engine.Status(i).String()] = n
		}
	}
	for _, w := range st.Workers {
		wr := reportWorker(w)
		if smp != nil {
			wr.Samples = smp.samples(w.Index)
		}
		r.Workers = append(r.Workers, wr)
	}
	tot := st.Total()
	c := tot.Cache
	r.Totals.StaleEvictions, r.Totals.BudgetEvictions = tot.Evicted, tot.BudgetEvicted
	r.Totals.Builds, r.Totals.Hits, r.Totals.Evictions, r.Totals.PeakBytes = c.Builds, c.Hits, c.Evictions, c.PeakBytes
	r.Totals.SummedPeakBytes, r.Totals.StaleByteSeconds, r.Totals.PeakRSS = st.PeakCacheBytes, st.StaleByteSeconds, tot.PeakRSS
	return r
}

// writeReport writes the JSON report to path atomically: a temporary file
// in the same folder, renamed when complete.
func writeReport(path string, r *report) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(data, '\n'))
}

// printTable prints the per-worker summary and the pool's cache figures;
// with workers that joined from elsewhere, each worker's host too.
func printTable(w io.Writer, st engine.Stats, wall time.Duration) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	hosts := slices.ContainsFunc(st.Workers, func(ws engine.WorkerStats) bool { return ws.Host != "" })
	host := func(s string) string {
		if hosts {
			return s + "\t"
		}
		return ""
	}
	fmt.Fprintln(tw, "worker\t"+host("host")+"pid\tjobs\tbuilt\thits\tevicted\tpeak cache\tpeak RSS\tbuild time\t")
	for _, ws := range st.Workers {
		c := ws.Cache
		fmt.Fprintf(tw, "%d\t%s%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t\n", ws.Index, host(workerHost(ws)), ws.PID, ws.Jobs, c.Builds, c.Hits, c.Evictions, humanBytes(c.PeakBytes), rss(ws.PeakRSS), roundDur(c.BuildTime))
	}
	if len(st.Workers) > 1 {
		tot := st.Total()
		c := tot.Cache
		fmt.Fprintf(tw, "total\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t\n", host(""), tot.Jobs, c.Builds, c.Hits, c.Evictions, humanBytes(c.PeakBytes), rss(tot.PeakRSS), roundDur(c.BuildTime))
	}
	tw.Flush()
	var parts []string
	for i, n := range st.Counts {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, engine.Status(i)))
		}
	}
	fmt.Fprintf(w, "jobs: %s; wall time %s; window published %d times\n", strings.Join(parts, ", "), roundDur(wall), st.Publishes)
	tot := st.Total()
	line := fmt.Sprintf("cache: the workers held at most %s at once (their peaks sum to %s); stale items held %s MiB·s",
		humanBytes(st.PeakCacheBytes), humanBytes(tot.Cache.PeakBytes), mibSeconds(st.StaleByteSeconds))
	if tot.BudgetEvicted > 0 {
		line += fmt.Sprintf("; %d evicted to stay within the budget", tot.BudgetEvicted)
	}
	fmt.Fprintln(w, line)
}

// rss shows a peak RSS, "-" where it is unknown.
func rss(n int64) string {
	if n <= 0 {
		return "-"
	}
	return humanBytes(n)
}

// mibSeconds shows byte-seconds as MiB·s, with two significant digits
// below 10.
func mibSeconds(bs float64) string {
	v := bs / (1 << 20)
	switch {
	case v == 0:
		return "0"
	case v < 0.01:
		return "<0.01"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
}

func roundDur(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}

// humanBytes prints n bytes in binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	v := float64(n) / unit
	i := 0
	for v >= unit && i < len(units)-1 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// finish reports a pool's end: the table (unless quiet), the JSON report
// (if asked), and the error to return.
func (s *session) finish(stdout io.Writer, command string, p *engine.Pool, runErr error, wall time.Duration, extra any) error {
	st := p.Stats()
	if !s.flags.quiet {
		printTable(stdout, st, wall)
		s.mu.Lock()
		b := s.budget
		s.mu.Unlock()
		if b.Jobs > 0 {
			fmt.Fprintf(s.stderr, "poolrun: the items of %d job(s) alone took their worker's cache past --cache-budget %s (at most %s: job %d on worker %d)\n",
				b.Jobs, humanBytes(int64(s.flags.cache.budget)), humanBytes(b.MaxBytes), b.JobID, b.Worker)
		}
	}
	if s.flags.report != "" {
		if err := writeReport(s.flags.report, s.makeReport(command, st, wall, extra)); err != nil {
			return errors.Join(runErr, fmt.Errorf("poolrun: writing the report: %w", err))
		}
	}
	return runErr
}

// thisHost is this host's name, as os.Hostname gives it ("" if it fails).
var thisHost = sync.OnceValue(func() string {
	h, _ := os.Hostname()
	return h
})

// workerHost is the name of the host of w's process: the one it gave
// when it joined from elsewhere, else this host's.
func workerHost(w engine.WorkerStats) string {
	if w.Host != "" {
		return w.Host
	}
	return thisHost()
}
