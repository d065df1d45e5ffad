package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/workflow"
)

// TestSessionFailedAttempts: a run that failed and is retried is an
// attempt that failed, with its command's exit status and standard
// error, or its timeout; a run whose worker died is aborted.
func TestSessionFailedAttempts(t *testing.T) {
	var stderr strings.Builder
	s := newSession(&poolFlags{}, &stderr)
	now := time.Now()
	labels := map[string]string{execflow.LabelID: "flaky"}
	ev := func(old, new engine.Status, err error, attempt int) {
		s.event(engine.Event{Kind: engine.JobStatus, JobID: 1, Labels: labels, Old: old, New: new, Err: err, Attempt: attempt, Worker: 1, Time: now})
	}
	s.event(engine.Event{Kind: engine.JobAdded, JobID: 1, Labels: labels, New: engine.Queued, Time: now})
	ev(engine.Queued, engine.Running, nil, 1)
	ev(engine.Running, engine.Queued, &engine.RemoteError{Msg: "job \"flaky\" (wf.yaml:2): exit status 3\noops\nmore"}, 1)
	ev(engine.Queued, engine.Running, nil, 2)
	ev(engine.Running, engine.Queued, &engine.TimeoutError{Timeout: time.Second}, 2)
	ev(engine.Queued, engine.Running, nil, 3)
	ev(engine.Running, engine.Queued, engine.ErrWorkerDied, 3)
	ev(engine.Queued, engine.Running, nil, 4)
	ev(engine.Running, engine.Succeeded, nil, 4)

	as := jobOf(s, 1).Attempts
	if len(as) != 4 {
		t.Fatalf("%d attempts, want 4", len(as))
	}
	if a := as[0]; a.Status != "failed" || a.ExitCode == nil || *a.ExitCode != 3 || a.StderrTail != "oops\nmore" || a.TimedOut {
		t.Errorf("attempt 1: %+v; want failed, exit 3, its stderr", a)
	}
	if a := as[1]; a.Status != "failed" || !a.TimedOut || a.ExitCode != nil {
		t.Errorf("attempt 2: %+v; want failed, timed out", a)
	}
	if a := as[2]; a.Status != "aborted" || a.TimedOut || a.ExitCode != nil {
		t.Errorf("attempt 3: %+v; want aborted", a)
	}
	if a := as[3]; a.Status != "succeeded" {
		t.Errorf("attempt 4: %+v; want succeeded", a)
	}
	want := `poolrun: job "flaky" (wf.yaml:2): exit status 3; running it again (attempt 2)` + "\n"
	if got := stderr.String(); !strings.HasPrefix(got, want) || strings.Count(got, "running it again") != 3 {
		t.Errorf("stderr:\n%s\nwant three lines that say it runs again, the first %q", got, want)
	}
}

func TestWithAttempts(t *testing.T) {
	head := `job "a" (wf.yaml:2): `
	for _, tc := range []struct {
		msg  string
		n    int
		want string
	}{
		{head + "exit status 1\ntail", 1, head + "exit status 1\ntail"},
		{head + "exit status 1\ntail", 3, head + "failed after 3 attempts: exit status 1\ntail"},
		{"aborted: worker died", 2, "aborted: worker died (failed after 2 attempts)"},
	} {
		if got := withAttempts(tc.msg, head, tc.n); got != tc.want {
			t.Errorf("withAttempts(%q, %d) = %q, want %q", tc.msg, tc.n, got, tc.want)
		}
	}
}

// capacity bounds a pool only when a job that runs declares threads or
// mem, warns of the jobs that run alone, and counts nothing with --listen.
func TestResourceCapacity(t *testing.T) {
	wf, err := workflow.Parse("wf.yaml", []byte(`jobs:
  - id: plain
    run: x
  - id: wide
    run: x
    threads: 8
  - id: big
    run: x
    mem: 3G
`))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := workflow.Parse("plain.yaml", []byte("jobs:\n  - id: a\n    run: x\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := resourceFlags{mem: 2 << 30}
	var stderr strings.Builder
	if opts := f.capacity(wf, nil, 4, false, &stderr); len(opts) != 1 {
		t.Errorf("%d options, want a Capacity", len(opts))
	}
	for _, want := range []string{
		`poolrun run: wf.yaml:4: job "wide" has threads: 8, more than -j 4: it runs alone`,
		`poolrun run: wf.yaml:7: job "big" has mem: 3.0 GiB, more than --mem 2.0 GiB: it runs alone`,
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	stderr.Reset()
	if opts := f.capacity(plain, nil, 4, false, &stderr); len(opts) != 0 || stderr.Len() > 0 {
		t.Errorf("a workflow without threads or mem: %d options, stderr %q; want none", len(opts), stderr.String())
	}
	if opts := f.capacity(wf, nil, 4, true, &stderr); len(opts) != 0 || !strings.Contains(stderr.String(), "not counted with --listen") {
		t.Errorf("with --listen: %d options, stderr %q; want none, and a note", len(opts), stderr.String())
	}
}
