package engine

import (
	"io"
	"testing"
	"time"
)

// TestWorkerRevoke drives a worker's side of the pipes by hand: a revoke
// of a job frame the worker has not read is answered at once (outcome
// revoked) and the frame is skipped; a revoke of a frame it has read does
// nothing.
func TestWorkerRevoke(t *testing.T) {
	jobR, jobW := io.Pipe()
	repR, repW := io.Pipe()
	ctlR, ctlW := io.Pipe()
	defer jobW.Close()
	defer ctlW.Close()
	replies := newFrameReader(repR)

	var e enc
	e.hello(1, workerParams{})
	accepted := make(chan *pipeWorker, 1)
	go func() {
		w, _, err := acceptPipe(jobR, repW, ctlR)
		if err != nil {
			t.Error(err)
		}
		accepted <- w
	}()
	jobW.Write(e.b)
	if kind, _, err := replies.next(); err != nil || kind != frameHello {
		t.Fatalf("handshake: frame %d, %v", kind, err)
	}
	w := <-accepted
	if w == nil {
		t.FailNow()
	}

	// Three jobs, then: a revoke of the second (not read: handed back at
	// once), of the first (read below, before the revoke: nothing), of a
	// fourth not sent yet (handed back; skipped when it comes).
	e.b = e.b[:0]
	for id := uint64(1); id <= 3; id++ {
		e.task(&task{id: id, fn: "f"})
	}
	go jobW.Write(e.b)
	t1, _, err := w.next()
	if err != nil || t1.id != 1 {
		t.Fatalf("first job: %+v, %v", t1, err)
	}
	revoke := func(id, seq uint64) {
		var e enc
		e.revoke(id, seq)
		ctlW.Write(e.b)
	}
	revoke(2, 2)
	if kind, d, err := replies.next(); err != nil || kind != frameDone {
		t.Fatalf("after the revoke of job 2: frame %d, %v", kind, err)
	} else if r := new(reply); d.done(r) != nil || r.id != 2 || r.outcome != outcomeRevoked {
		t.Fatalf("after the revoke of job 2: %+v, %v; want job 2 handed back", r, d.err)
	}
	revoke(1, 1)
	revoke(4, 4)
	if kind, d, err := replies.next(); err != nil || kind != frameDone {
		t.Fatalf("after the revokes of jobs 1 and 4: frame %d, %v", kind, err)
	} else if r := new(reply); d.done(r) != nil || r.id != 4 || r.outcome != outcomeRevoked {
		t.Fatalf("after the revokes of jobs 1 and 4: %+v, %v; want job 4 handed back, and nothing for job 1, which was read", r, d.err)
	}
	// The worker reads on: job 3 (2 is skipped), then 5 (4 is skipped).
	t3, _, err := w.next()
	if err != nil || t3.id != 3 {
		t.Fatalf("the job after the revoked one: %+v, %v; want job 3", t3, err)
	}
	e.b = e.b[:0]
	e.task(&task{id: 4, fn: "f"})
	e.task(&task{id: 5, fn: "f"})
	go jobW.Write(e.b)
	done := make(chan *task, 1)
	go func() {
		t5, _, err := w.next()
		if err != nil {
			t.Error(err)
		}
		done <- t5
	}()
	select {
	case t5 := <-done:
		if t5 == nil || t5.id != 5 {
			t.Fatalf("after job 3: %+v, want job 5", t5)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not read on past the revoked frame")
	}
}
