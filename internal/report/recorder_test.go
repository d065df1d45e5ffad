package report

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
)

// TestRecorderSentAndStarted: a run's record gives when it was sent (the
// status Running) and when it began (JobStarted), and its seconds from
// when it began. A run sent ahead and cancelled before it began has no
// started, and its seconds from when it was sent; a run taken back
// before it began leaves neither; an attempt whose worker died before it
// began has no started. The JSON report spells them sent and started,
// and its page draws the bars from started.
func TestRecorderSentAndStarted(t *testing.T) {
	rec := NewRecorder()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	status := func(sec float64, id int, old, new engine.Status, err error) {
		rec.Event(engine.Event{Kind: engine.JobStatus, Time: at(sec), JobID: id, Func: "test.work", Old: old, New: new, Err: err, Worker: 1})
	}
	started := func(sec float64, id int) {
		rec.Event(engine.Event{Kind: engine.JobStarted, Time: at(sec), JobID: id, Func: "test.work", Worker: 1})
	}
	for id := 1; id <= 4; id++ {
		rec.Event(engine.Event{Kind: engine.JobAdded, Time: t0, JobID: id, Func: "test.work", New: engine.Queued})
	}
	died := errors.New("worker 1 (pid 10) died: signal: killed")
	// Job 1 runs; job 2, sent behind it, is cancelled before it begins.
	status(0.1, 1, engine.Queued, engine.Running, nil)
	status(0.12, 2, engine.Queued, engine.Running, nil)
	started(0.15, 1)
	status(0.4, 1, engine.Running, engine.Succeeded, nil)
	status(0.45, 2, engine.Running, engine.Cancelled, context.Canceled)
	// Job 3 is sent, taken back before it begins, sent again, and runs.
	status(0.5, 3, engine.Queued, engine.Running, nil)
	status(0.55, 3, engine.Running, engine.Queued, nil)
	status(0.6, 3, engine.Queued, engine.Running, nil)
	started(0.7, 3)
	status(0.9, 3, engine.Running, engine.Succeeded, nil)
	// Job 4 begins and its worker dies; sent again, its worker dies before
	// it begins.
	status(1.0, 4, engine.Queued, engine.Running, nil)
	started(1.1, 4)
	status(1.2, 4, engine.Running, engine.Queued, died)
	status(1.3, 4, engine.Queued, engine.Running, nil)
	status(1.5, 4, engine.Running, engine.Aborted, died)

	for _, tt := range []struct {
		job                         int
		sent, started, end, seconds float64 // started < 0: none
	}{
		{1, 0.1, 0.15, 0.4, 0.25},
		{2, 0.12, -1, 0.45, 0.33},
		{3, 0.6, 0.7, 0.9, 0.2},
		{4, 1.3, -1, 1.5, 0.2},
	} {
		j := rec.jobs[tt.job]
		if j.Sent == nil || !j.Sent.Equal(at(tt.sent)) {
			t.Errorf("job %d: sent %v, want %v", tt.job, j.Sent, at(tt.sent))
		}
		switch {
		case tt.started < 0 && j.Started != nil:
			t.Errorf("job %d: started %v, want none: it never began", tt.job, j.Started)
		case tt.started >= 0 && (j.Started == nil || !j.Started.Equal(at(tt.started))):
			t.Errorf("job %d: started %v, want %v", tt.job, j.Started, at(tt.started))
		}
		if j.Ended == nil || !j.Ended.Equal(at(tt.end)) {
			t.Errorf("job %d: ended %v, want %v", tt.job, j.Ended, at(tt.end))
		}
		if math.Abs(j.Seconds-tt.seconds) > 1e-9 {
			t.Errorf("job %d: %v seconds, want %v", tt.job, j.Seconds, tt.seconds)
		}
	}
	if n := len(rec.jobs[3].Attempts); n != 0 {
		t.Errorf("job 3, taken back once, has %d attempts, want none", n)
	}
	a := rec.jobs[4].Attempts
	if len(a) != 2 {
		t.Fatalf("job 4 has %d attempts, want 2", len(a))
	}
	if !a[0].Sent.Equal(at(1.0)) || a[0].Started == nil || !a[0].Started.Equal(at(1.1)) || !a[0].Ended.Equal(at(1.2)) {
		t.Errorf("job 4's first attempt: sent %v, started %v, ended %v; want %v, %v, %v", a[0].Sent, a[0].Started, a[0].Ended, at(1.0), at(1.1), at(1.2))
	}
	if !a[1].Sent.Equal(at(1.3)) || a[1].Started != nil || !a[1].Ended.Equal(at(1.5)) {
		t.Errorf("job 4's second attempt: sent %v, started %v, ended %v; want %v, none, %v", a[1].Sent, a[1].Started, a[1].Ended, at(1.3), at(1.5))
	}

	// The JSON, as written.
	path := filepath.Join(t.TempDir(), "r.json")
	st := engine.Stats{Workers: []engine.WorkerStats{{Index: 1, PID: 10, Jobs: 4}}}
	if err := Write(path, rec.Report("run wf.yaml", Options{Workers: 1}, st, t0, 2*time.Second, nil, nil)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Jobs []struct {
			Sent, Started string
			Attempts      []map[string]any
		}
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	stamp := func(sec float64) string { return at(sec).Format(time.RFC3339Nano) }
	if len(raw.Jobs) != 4 {
		t.Fatalf("%d jobs in the report, want 4", len(raw.Jobs))
	}
	if j := raw.Jobs[0]; j.Sent != stamp(0.1) || j.Started != stamp(0.15) {
		t.Errorf("job 1 in the JSON: sent %q, started %q; want %q, %q", j.Sent, j.Started, stamp(0.1), stamp(0.15))
	}
	if j := raw.Jobs[1]; j.Sent != stamp(0.12) || j.Started != "" {
		t.Errorf("job 2 in the JSON: sent %q, started %q; want %q and none", j.Sent, j.Started, stamp(0.12))
	}
	if a := raw.Jobs[3].Attempts; len(a) != 2 || a[0]["sent"] != stamp(1.0) || a[0]["started"] != stamp(1.1) || a[1]["sent"] != stamp(1.3) || a[1]["started"] != nil {
		t.Errorf("job 4's attempts in the JSON: %v; want sent and started, then sent alone", a)
	}

	// The page, from the file: bars from started, or sent where the run
	// never began.
	l, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := Render(&page, l, "r.json"); err != nil {
		t.Fatal(err)
	}
	tl := newTimeline(l.Pool)
	bars := jobBars(parsePage(t, page.Bytes()))
	checkBar(t, tl, bars, 1, "sent 0.100 s, started 0.150 s, ended 0.400 s: 250ms", 0.15, 0.4)
	checkBar(t, tl, bars, 2, "sent 0.120 s, not started, ended 0.450 s: 330ms", 0.12, 0.45)
	checkBar(t, tl, bars, 3, "sent 0.600 s, started 0.700 s, ended 0.900 s: 200ms", 0.7, 0.9)
	checkBar(t, tl, bars, 4, "attempt 1 of 2: aborted\nsent 1.000 s, started 1.100 s, ended 1.200 s: 100ms", 1.1, 1.2)
	checkBar(t, tl, bars, 4, "attempt 2 of 2: aborted\nsent 1.300 s, not started, ended 1.500 s: 200ms", 1.3, 1.5)
}
