package cli

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/report"
)

// TestSessionTakenBack: a job sent ahead to a worker that left, or revoked
// for an idle one, goes from Running back to Queued without an error: it
// never ran, so it is no attempt and no "running it again"; a job whose
// worker died under it (the error says so) is both.
func TestSessionTakenBack(t *testing.T) {
	var stderr strings.Builder
	s := newSession(&poolFlags{}, &stderr)
	now := time.Now()
	ev := func(id int, old, new engine.Status, err error, attempt int) {
		s.event(engine.Event{Kind: engine.JobStatus, JobID: id, Old: old, New: new, Err: err, Attempt: attempt, Worker: 1, Time: now})
	}
	for id := 1; id <= 2; id++ {
		s.event(engine.Event{Kind: engine.JobAdded, JobID: id, New: engine.Queued, Time: now})
		ev(id, engine.Queued, engine.Running, nil, 0)
	}
	ev(1, engine.Running, engine.Queued, nil, 0) // taken back
	ev(2, engine.Running, engine.Queued, errors.New("worker process died: killed"), 0)
	for id := 1; id <= 2; id++ {
		ev(id, engine.Queued, engine.Running, nil, 1)
		ev(id, engine.Running, engine.Succeeded, nil, 1)
	}
	if n := len(jobOf(s, 1).Attempts); n != 0 {
		t.Errorf("the job taken back has %d attempts recorded, want none: it ran once", n)
	}
	if n := len(jobOf(s, 2).Attempts); n != 2 {
		t.Errorf("the job whose worker died has %d attempts recorded, want 2", n)
	}
	if got := stderr.String(); strings.Count(got, "running it again") != 1 || !strings.Contains(got, "job 2") {
		t.Errorf("stderr:\n%s\nwant one line, for job 2, that says it runs again", got)
	}
}

// jobOf is the record of job id in s's report; nil if there is none.
func jobOf(s *session, id int) *report.Job {
	var rec *report.Job
	s.rec.Job(id, func(j *report.Job) { rec = j })
	return rec
}
