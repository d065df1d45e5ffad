package report

import (
	"cmp"
	"time"
)

// This file is the whole schema of the JSON report, as docs/REPORT.md
// describes it field by field: a pool's report ([Pool], written by
// poolrun scaffold and run) and a bench's ([Bench]). The JSON names are
// the report's; renaming one, or changing its meaning, changes [Version].

// Version is the version of the pool's report that this poolrun writes,
// and the newest that [Load] reads. A report without a version is of
// version 0 (written before samples): it loads, and its page says that
// its charts are empty.
//
//   - 1 added version, started, sample_seconds and the workers' samples.
//     Jobs' and attempts' sent came later within version 1: where a report
//     has it, started is when a run began on its worker; where it has not
//     (an older poolrun wrote it), started is when the run was sent.
//   - 2 added each worker's items and, for a workflow's jobs, job_id,
//     line, exit_status, signal and peak_rss_bytes: a reader of version 1
//     would draw a run report's memory as poolrun's own, which it no
//     longer is on the page.
const Version = 2

// Pool is the report of a command that runs one pool (scaffold, run).
type Pool struct {
	// Version is [Version] when written; 0 in a report from before it.
	Version int `json:"version"`
	// Command is the command that ran: "scaffold", or "run FILE".
	Command string `json:"command"`
	// Started is when the pool started running: time 0 of the samples.
	Started time.Time `json:"started"`
	// SampleSeconds is the time between two samples at the end of the run
	// (0.1 s, doubled each time the series were halved; see [Sampler]).
	SampleSeconds float64  `json:"sample_seconds"`
	Options       Options  `json:"options"` // the options the pool ran with
	Workers       []Worker `json:"workers"` // one per worker place, in order
	Jobs          []*Job   `json:"jobs"`    // every job, by ID
	Totals        Totals   `json:"totals"`  // the pool's figures
	// Result is the command's own result (scaffold: the cells,
	// connections and checksum of its output); omitted if it has none or
	// failed.
	Result any `json:"result,omitempty"`
}

// Options are the options a pool ran with.
type Options struct {
	Workers        int     `json:"workers"`                   // -j; 0: serial
	Retries        int     `json:"retries,omitempty"`         // --retries
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"` // --timeout; 0: none
	CacheSettings
}

// CacheSettings are the options that say how the workers hold items.
type CacheSettings struct {
	Evict        string `json:"evict"` // stale, pool-wide, never or each-job
	Affinity     bool   `json:"affinity"`
	IdleEviction bool   `json:"idle_eviction"`
	CacheBudget  int64  `json:"cache_budget_bytes"` // 0: none
}

// Worker is what a report says of one worker place: the worker process
// that holds it and those that held it before (a worker that dies is
// replaced in its place).
type Worker struct {
	Index int `json:"index"` // the place's number, from 1
	PID   int `json:"pid"`   // its current (or last) process, on Host
	// Host is the name of the host its process runs on: the pool's own
	// for local workers, the one a remote worker gave when it joined
	// (poolrun worker). Omitted where unknown.
	Host     string `json:"host,omitempty"`
	Jobs     int    `json:"jobs"`     // the jobs its processes ran
	Restarts int    `json:"restarts"` // the processes that replaced one that died
	// Samples are the worker's cache bytes and resident memory over time
	// (see [Sample]). Omitted in bench reports.
	Samples []Sample `json:"samples,omitempty"`
	// StaleEvictions counts the items evicted while the pool ran, by its
	// policy; BudgetEvictions those evicted to stay within the cache
	// budget; Cache.Evictions counts both and the clear at the end.
	StaleEvictions  uint64 `json:"stale_evictions"`
	BudgetEvictions uint64 `json:"budget_evictions"`
	// PeakRSS is the largest peak resident memory of the place's
	// processes (VmHWM; 0 where unknown; in serial mode this process's).
	PeakRSS int64 `json:"peak_rss_bytes"`
	Cache   Cache `json:"cache"`
	// Items are the lifetimes of the items the place's processes built,
	// in the order they were built (version 2); omitted if none.
	Items []*Item `json:"items,omitempty"`
}

// Cache is a worker place's cache counters, summed over its processes.
type Cache struct {
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

// Sample is one moment of a worker's series.
type Sample struct {
	// T is the moment, in seconds since the pool started (the report's
	// started), to the millisecond.
	T float64 `json:"t"`
	// CacheBytes is what the worker's cache held, as the worker last
	// reported it (after each job, while idle, and at the end).
	CacheBytes int64 `json:"cache_bytes"`
	// RSS is the worker process's resident memory at T (VmRSS; in serial
	// mode this process's); 0 where unknown: before the worker started,
	// after it ended, on a system without /proc.
	RSS int64 `json:"rss_bytes"`
	// Builds and Evictions count the items the worker built and evicted
	// since the sample before, attributed to the first sample that saw
	// the worker's counters grow. Omitted when 0.
	Builds    uint64 `json:"builds,omitempty"`
	Evictions uint64 `json:"evictions,omitempty"`
}

// Item is one lifetime of an item on a worker: from the start of its
// build to its eviction.
type Item struct {
	// Name is the item's cache name: a workflow item's is
	// "poolrun.item:NAME@HASH", a scaffold's as its package defines it.
	Name string `json:"name"`
	// Bytes is its size, as its Size function reported it (0 without
	// one).
	Bytes int64 `json:"bytes"`
	// BuildStarted and Built are when its build began and ended.
	BuildStarted time.Time `json:"build_started"`
	Built        time.Time `json:"built"`
	// Evicted is when it was evicted, and EvictedBy why: "policy" (no
	// unfinished job needed it), "budget" (to make room within
	// --cache-budget), "end" (the worker cleared its cache when the pool
	// ended) or "died" (its worker process died: the time is when the
	// pool learnt it). Both omitted for an item whose end the pool never
	// heard of (its worker was killed or left).
	Evicted   *time.Time `json:"evicted,omitempty"`
	EvictedBy string     `json:"evicted_by,omitempty"`
}

// Job is what the report says of one job. Attempts lists its runs when
// there were more than one (--retries).
type Job struct {
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
	// Added is when it was queued; Sent when its last run was sent to its
	// worker, Started when that run began there, Ended when it ended; each
	// omitted if it never happened (Started, for one, of a run cancelled
	// or whose worker died before it began). A worker sent jobs ahead runs
	// them one after the other: Sent may precede Started by the runs
	// before it. A report of an older poolrun has no sent, and the send
	// time under started.
	Added   time.Time  `json:"added"`
	Sent    *time.Time `json:"sent,omitempty"`
	Started *time.Time `json:"started,omitempty"`
	Ended   *time.Time `json:"ended,omitempty"`
	// Seconds is Ended less Started, or less Sent for a run that never
	// began: how long its last run took.
	Seconds float64 `json:"seconds,omitempty"`
	// Error is why it failed, was cancelled or aborted.
	Error string `json:"error,omitempty"`
	// Attempts lists every run of a job that ran more than once, in
	// order, the last included; omitted for a job that ran at most once.
	Attempts []Attempt `json:"attempts,omitempty"`
	// A workflow job's id, line, exit status and peak memory (run).
	Command
}

// Begin is when the job's last run began as far as the record knows:
// Started, else Sent (a run that never began; a report of an older
// poolrun, whose Started is the send time); nil if it never ran.
func (j *Job) Begin() *time.Time { return cmp.Or(j.Started, j.Sent) }

// Command is what a run report says of a workflow job's command, beside
// the job's own fields.
type Command struct {
	// JobID is the workflow's id of the job; Line the line of the entry
	// of the workflow file it came from (jobs of one foreach share it).
	JobID string `json:"job_id,omitempty"`
	Line  int    `json:"line,omitempty"`
	// ExitStatus is its command's exit status (-1 for one killed by a
	// signal, named by Signal); omitted where the command did not end by
	// itself (it did not run, or timed out, or was cancelled).
	ExitStatus *int   `json:"exit_status,omitempty"`
	Signal     string `json:"signal,omitempty"`
	// PeakRSS is the peak resident memory of the command's largest
	// process (wait4's ru_maxrss), in bytes; omitted where unknown: a
	// command that did not run, one that failed using no more memory
	// than poolrun did as it started it, or a report of another command
	// (a failed command's figure is to the KiB).
	// Linux counts in it the memory of poolrun itself when it started the
	// command (an exec takes the high-water mark of the image it
	// replaces): a figure at or below the report's
	// Totals.CommandRSSFloor says only that the command used no more
	// than that.
	PeakRSS int64 `json:"peak_rss_bytes,omitempty"`
}

// Attempt is one run of a job that ran more than once.
type Attempt struct {
	Worker int       `json:"worker"` // the worker it ran on, from 1
	Sent   time.Time `json:"sent"`   // when it was sent to that worker
	// Started is when it began there; omitted for a run that never began
	// (its worker died, or it was cancelled, first). A report of an older
	// poolrun has no sent, and the send time here.
	Started *time.Time `json:"started,omitempty"`
	Ended   time.Time  `json:"ended"` // when it ended
	// Status is how the run ended: for one that was run again, aborted
	// (its worker died) or failed (a workflow job's retries:), else the
	// job's status.
	Status string `json:"status"`
	Error  string `json:"error,omitempty"` // why it did not succeed
	// ExitCode, Signal and StderrTail are, for a run whose command (a
	// workflow job's, or an item's it needed) failed, its exit status (-1
	// when killed by a signal), the signal's name and the last lines of
	// its standard error; TimedOut says that the run passed its timeout.
	// Each omitted otherwise.
	ExitCode   *int   `json:"exit_code,omitempty"`
	Signal     string `json:"signal,omitempty"`
	StderrTail string `json:"stderr_tail,omitempty"`
	TimedOut   bool   `json:"timed_out,omitempty"`
}

// Begin is when the run began as far as the record knows: Started, else
// Sent.
func (a *Attempt) Begin() time.Time {
	if a.Started != nil {
		return *a.Started
	}
	return a.Sent
}

// Totals are a report's figures for the whole pool.
type Totals struct {
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
	BudgetExceeded BudgetExceeded `json:"budget_exceeded"`
	// Publishes counts the window publishes that changed a required set.
	Publishes uint64 `json:"window_publishes"`
	// CommandRSSFloor is, in a run report, poolrun's own peak resident
	// memory once its commands had ended: Linux counts it in each
	// command's peak_rss_bytes (version 2); omitted elsewhere.
	CommandRSSFloor int64 `json:"command_rss_floor_bytes,omitempty"`
}

// BudgetExceeded sums the BudgetExceeded events of a pool.
type BudgetExceeded struct {
	// Jobs counts the jobs whose own items took their worker past the
	// budget (--cache-budget); 0 without a budget.
	Jobs int `json:"jobs"`
	// MaxBytes is the most a worker's cache held when it was past the
	// budget; Worker and JobID say where and when (0 if Jobs is 0).
	MaxBytes int64 `json:"max_bytes"`
	Worker   int   `json:"worker"`
	JobID    int   `json:"job"`
}

// Bench is what poolrun bench measured (--report, --json). It has no
// version yet.
type Bench struct {
	Command string  `json:"command"` // "bench"
	Config  string  `json:"config"`  // the file, or "embedded"
	Scale   float64 `json:"scale"`
	// Jobs and Items count the workload's jobs and distinct cache items.
	Jobs    int      `json:"jobs"`
	Items   int      `json:"items"`
	Workers []int    `json:"workers"` // the worker counts, in the order run; 0: serial
	Modes   []string `json:"modes"`
	Repeat  int      `json:"repeat"`
	// Results holds one entry per worker count, in the order of Workers.
	Results []*BenchSet `json:"results"`
	// ChecksumsAgree is true when every run of every mode at every worker
	// count wrote the same output; Checksum is that output's checksum.
	ChecksumsAgree bool   `json:"checksums_agree"`
	Checksum       string `json:"checksum,omitempty"`
}

// BenchSet holds the modes run at one worker count.
type BenchSet struct {
	Workers int          `json:"workers"` // 0: serial
	Modes   []*BenchMode `json:"modes"`
}

// BenchMode holds the runs of one mode at one worker count and their
// median, lowest and highest figures.
type BenchMode struct {
	Mode string `json:"mode"`
	// Options are the mode's settings; the budget mode's budget is in
	// each run (cache_budget_bytes), and BudgetOfNever says it is half of
	// never's largest worker peak in the same round.
	Options       CacheSettings `json:"options"`
	BudgetOfNever bool          `json:"budget_half_of_never,omitempty"`
	Runs          []BenchRun    `json:"runs"`
	Median        BenchFigures  `json:"median"`
	Min           BenchFigures  `json:"min"`
	Max           BenchFigures  `json:"max"`
}

// BenchRun is one pool run. CacheBudget is the budget mode's budget, and
// BudgetExceeded counts the jobs whose own items took their worker past it.
type BenchRun struct {
	BenchFigures
	Checksum       string   `json:"checksum"`
	CacheBudget    int64    `json:"cache_budget_bytes,omitempty"`
	BudgetExceeded int      `json:"budget_exceeded_jobs,omitempty"`
	Workers        []Worker `json:"workers"`
}

// BenchFigures are a run's figures (or their medians, lowest or highest
// over runs, figure by figure). Counts are summed over the workers.
type BenchFigures struct {
	WallSeconds float64 `json:"wall_seconds"`
	Builds      float64 `json:"builds"`
	Hits        float64 `json:"hits"`
	// Evictions counts every eviction, the clear at the end included;
	// StaleEvictions those by the policy while the pool ran,
	// BudgetEvictions those to stay within the budget.
	Evictions       float64 `json:"evictions"`
	StaleEvictions  float64 `json:"stale_evictions"`
	BudgetEvictions float64 `json:"budget_evictions"`
	// PeakBytes is the sum of the workers' own cache peaks, which
	// WorkerPeakBytes lists by worker; SummedPeakBytes is the peak over
	// time of what they held together.
	PeakBytes        float64   `json:"peak_cache_bytes"`
	SummedPeakBytes  float64   `json:"summed_peak_bytes"`
	StaleByteSeconds float64   `json:"stale_byte_seconds"`
	WorkerPeakBytes  []float64 `json:"worker_peak_cache_bytes"`
	// MaxPeakRSS is the largest of the workers' peak RSS, which
	// WorkerPeakRSS lists by worker (0 where unknown).
	MaxPeakRSS    float64   `json:"max_peak_rss_bytes"`
	WorkerPeakRSS []float64 `json:"worker_peak_rss_bytes"`
}

// File is a report read back by [Load]: exactly one of Pool and Bench is
// set.
type File struct {
	Pool  *Pool  // of scaffold or run
	Bench *Bench // of bench
}
