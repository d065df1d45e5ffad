package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/poolrun/poolrun/internal/human"
)

// poolrun report --format trace writes a pool's report in the Chrome trace
// event format (the JSON object form), which Perfetto
// (https://ui.perfetto.dev) and chrome://tracing open:
//
//   - each worker place is a process (pid = the place's number, named
//     "worker N (pid P on HOST)"); its job runs are complete events ("X")
//     on its thread "jobs" (tid 1) and, where runs overlap (a run drawn
//     from when it was sent), on "jobs 2", "jobs 3"... (tid 2, 3...);
//   - each item lifetime is an async span ("b" to "e", category "item")
//     of that process, from the start of its build to its eviction, with
//     a nested span "build" for the build itself;
//   - counters ("C") per worker: "cache bytes" from the samples, and
//     "memory": the process's RSS, or, for a run report of version 2, the
//     sum of its running commands' peak RSS (as on the page);
//   - jobs that never ran are instant events ("i") of process 0, "not
//     run", at the time they ended.
//
// Times are microseconds since the pool started (the report's started).

// traceEvent is one event of the trace.
type traceEvent struct {
	Name  string         `json:"name"`
	Cat   string         `json:"cat,omitempty"`
	Ph    string         `json:"ph"`
	Ts    float64        `json:"ts"`
	Dur   *float64       `json:"dur,omitempty"`
	Pid   int            `json:"pid"`
	Tid   int            `json:"tid"`
	ID    string         `json:"id,omitempty"`
	Scope string         `json:"s,omitempty"`
	Args  map[string]any `json:"args,omitempty"`
}

// traceFile is the JSON object a trace file holds.
type traceFile struct {
	TraceEvents     []traceEvent   `json:"traceEvents"`
	DisplayTimeUnit string         `json:"displayTimeUnit"`
	OtherData       map[string]any `json:"otherData"`
}

// usec is s seconds in microseconds, to the nanosecond; within a century
// either side of t0, so that odd times in a report still make JSON
// numbers.
func usec(s float64) float64 {
	const century = 100 * 365 * 24 * 3600
	if math.IsNaN(s) {
		return 0
	}
	return math.Round(min(max(s, -century), century)*1e9) / 1e3
}

// WriteTrace writes the trace of pool report r, read from the file named
// src, to w.
func WriteTrace(w io.Writer, r *Pool, src string) error {
	tl := newTimeline(r)
	byWorker, notRun := tl.bars()
	workers := tl.workers(byWorker)

	var evs []traceEvent
	meta := func(pid, tid int, kind, name string) {
		evs = append(evs, traceEvent{Name: kind, Ph: "M", Pid: pid, Tid: tid, Args: map[string]any{"name": name}})
	}
	cmdMem := commandsMemory(r)
	for _, w := range workers {
		name := fmt.Sprintf("worker %d", w.Index)
		switch {
		case w.PID > 0 && w.Host != "":
			name += fmt.Sprintf(" (pid %d on %s)", w.PID, w.Host)
		case w.PID > 0:
			name += fmt.Sprintf(" (pid %d)", w.PID)
		}
		meta(w.Index, 0, "process_name", name)
		evs = append(evs, traceEvent{Name: "process_sort_index", Ph: "M", Pid: w.Index, Args: map[string]any{"sort_index": w.Index}})
		bars := byWorker[w.Index]
		rows := barRows(bars)
		for row := range slices.Max(append(rows, 0)) + 1 {
			tname := "jobs"
			if row > 0 {
				tname = fmt.Sprintf("jobs %d", row+1)
			}
			meta(w.Index, row+1, "thread_name", tname)
		}
		for i, b := range bars {
			d := usec(max(b.end-b.start, 0))
			args := map[string]any{"job": b.job.ID, "func": b.job.Func, "status": b.status}
			if len(b.job.Labels) > 0 {
				args["labels"] = b.job.Labels
			}
			if b.attempt > 0 {
				args["attempt"] = b.attempt
			}
			if b.err != "" {
				args["error"] = human.Clip(b.err, 2000)
			}
			// Each run's own exit status; the peak RSS is the last run's.
			if b.exit != nil {
				args["exit_status"] = *b.exit
			}
			if b.signal != "" {
				args["signal"] = b.signal
			}
			if b.last() && b.job.PeakRSS > 0 {
				args["peak_rss_bytes"] = b.job.PeakRSS
			}
			evs = append(evs, traceEvent{Name: shortName(b.job), Cat: "job," + b.status, Ph: "X", Ts: usec(b.start), Dur: &d,
				Pid: w.Index, Tid: rows[i] + 1, Args: args})
		}
		for i, it := range w.Items {
			id := fmt.Sprintf("w%d.i%d", w.Index, i+1)
			start, end := tl.itemSpan(it)
			args := map[string]any{"name": it.Name, "bytes": it.Bytes, "evicted_by": it.EvictedBy}
			n := itemName(it.Name)
			built := max(tl.sec(it.Built), start)
			evs = append(evs,
				traceEvent{Name: n, Cat: "item", Ph: "b", Ts: usec(start), Pid: w.Index, Tid: 1, ID: id, Args: args},
				traceEvent{Name: "build", Cat: "item", Ph: "b", Ts: usec(start), Pid: w.Index, Tid: 1, ID: id},
				traceEvent{Name: "build", Cat: "item", Ph: "e", Ts: usec(built), Pid: w.Index, Tid: 1, ID: id},
				traceEvent{Name: n, Cat: "item", Ph: "e", Ts: usec(max(end, built)), Pid: w.Index, Tid: 1, ID: id})
		}
		for _, s := range tl.cacheSteps(w) {
			evs = append(evs, traceEvent{Name: "cache bytes", Ph: "C", Ts: usec(s.t), Pid: w.Index, Args: map[string]any{"bytes": s.v}})
		}
		for _, s := range w.Samples {
			if !cmdMem {
				evs = append(evs, traceEvent{Name: "memory", Ph: "C", Ts: usec(s.T), Pid: w.Index, Args: map[string]any{"rss": s.RSS}})
			}
		}
		if cmdMem {
			for _, s := range tl.commandSteps(bars) {
				evs = append(evs, traceEvent{Name: "memory", Ph: "C", Ts: usec(s.t), Pid: w.Index, Args: map[string]any{"commands_peak_rss": s.v}})
			}
		}
	}
	if len(notRun) > 0 {
		meta(0, 0, "process_name", "not run")
		for _, j := range notRun {
			t := tl.span
			if j.Ended != nil {
				t = tl.sec(*j.Ended)
			}
			args := map[string]any{"job": j.ID, "func": j.Func, "status": j.Status}
			if j.Error != "" {
				args["error"] = human.Clip(j.Error, 2000)
			}
			evs = append(evs, traceEvent{Name: shortName(j), Cat: "job," + j.Status, Ph: "i", Ts: usec(t), Pid: 0, Tid: 0, Scope: "p", Args: args})
		}
	}
	tf := traceFile{TraceEvents: evs, DisplayTimeUnit: "ms", OtherData: map[string]any{
		"command": r.Command, "started": r.Started, "report": src, "report_version": r.Version, "poolrun": "poolrun report --format trace"}}
	data, err := json.Marshal(tf)
	if err != nil {
		return err
	}
	_, err = w.Write(append(data, '\n'))
	return err
}

// barRows places a worker's runs in rows where none overlaps another, as
// complete events of one thread must nest, and returns each run's row.
func barRows(bars []bar) []int {
	rows, _ := placeRows(len(bars), 0, func(i int) (float64, float64) { return bars[i].start, bars[i].end })
	return rows
}
