package engine

import (
	"os"
	"testing"
	"time"
)

// TestWorkerSaysStarted drives a worker's writes by hand: a job that
// returns at once is said started with its reply, in the same write, and
// only there, however long the stream of such jobs runs (its timer fires
// meanwhile); a job that runs on is said started once it has run for
// startedDelay, without a reply, and its reply follows alone.
func TestWorkerSaysStarted(t *testing.T) {
	r, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w := &pipeWorker{out: wr}
	type frame struct {
		kind byte
		id   uint64
		ago  time.Duration
	}
	frames := make(chan frame, 64)
	go func() {
		defer close(frames)
		fr := newFrameReader(r)
		for {
			kind, d, err := fr.next()
			if err != nil {
				return
			}
			f := frame{kind: kind}
			switch kind {
			case frameStarted:
				f.id, f.ago, err = d.started()
			case frameDone:
				var rep reply
				err = d.done(&rep)
				f.id = rep.id
			}
			if err != nil {
				t.Error(err)
				return
			}
			frames <- f
		}
	}()
	recv := func() frame {
		t.Helper()
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatal("the worker's pipe ended")
			}
			return f
		case <-time.After(10 * time.Second):
			t.Fatal("no frame from the worker")
		}
		return frame{}
	}

	// Short jobs for several times startedDelay, so that the timer fires
	// while they run.
	id := uint64(0)
	for begin := time.Now(); time.Since(begin) < 5*startedDelay; {
		id++
		at := time.Now()
		if err := w.started(id, at); err != nil {
			t.Fatal(err)
		}
		if err := w.done(&reply{id: id, start: at, elapsed: time.Since(at)}); err != nil {
			t.Fatal(err)
		}
		if f := recv(); f.kind != frameStarted || f.id != id {
			t.Fatalf("job %d: frame %d of job %d, want its started", id, f.kind, f.id)
		}
		if f := recv(); f.kind != frameDone || f.id != id {
			t.Fatalf("job %d: frame %d of job %d after its started, want its reply", id, f.kind, f.id)
		}
	}

	id++
	at := time.Now()
	if err := w.started(id, at); err != nil {
		t.Fatal(err)
	}
	f := recv()
	if f.kind != frameStarted || f.id != id {
		t.Fatalf("a job that runs on: frame %d of job %d, want its started", f.kind, f.id)
	}
	if f.ago < startedDelay {
		t.Errorf("a job that runs on was said started after %v, want %v or more", f.ago, startedDelay)
	}
	if err := w.done(&reply{id: id, start: at, elapsed: time.Since(at)}); err != nil {
		t.Fatal(err)
	}
	if f := recv(); f.kind != frameDone || f.id != id {
		t.Fatalf("after its started: frame %d of job %d, want the reply of job %d", f.kind, f.id, id)
	}
	wr.Close()
	if f, ok := <-frames; ok {
		t.Errorf("after the last reply: frame %d of job %d", f.kind, f.id)
	}
}
