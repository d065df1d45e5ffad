package cli

import (
	"encoding/json"
	"sort"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/atomicfile"
)

// reportVersion is the version of the JSON report that this poolrun
// writes, and the newest that poolrun report reads: 1 added version,
// started, sample_seconds and the workers' samples. A report without a
// version is of version 0 (poolrun report draws it without samples).
// Jobs' and attempts' sent came later within version 1: where a report
// has it, started is when a run began on its worker; where it has not (an
// older poolrun wrote it), started is when the run was sent, and poolrun
// report draws the bar from it as that poolrun did. An older poolrun reads
// the newer reports too, and draws their bars from when the runs began.
// 2 added each worker's items (their lifetimes, named and sized, and why
// each was evicted) and, for a workflow's jobs, job_id, line,
// exit_status, signal and peak_rss_bytes: a reader of version 1 would
// draw a run report's memory as poolrun's own, which it no longer is on
// the page. docs/REPORT.md describes every field.
const reportVersion = 2

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
	// Items are the lifetimes of the items the place's processes built,
	// in the order they were built (version 2); omitted if none.
	Items []*itemRecord `json:"items,omitempty"`
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
	// CommandRSSFloor is, in a run report, poolrun's own peak resident
	// memory once its commands had ended: Linux counts it in each
	// command's peak_rss_bytes (version 2); omitted elsewhere.
	CommandRSSFloor int64 `json:"command_rss_floor_bytes,omitempty"`
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
	r.Totals.CommandRSSFloor = s.rssFloor
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
		s.mu.Lock()
		wr.Items = s.items.items(w.Index)
		s.mu.Unlock()
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
