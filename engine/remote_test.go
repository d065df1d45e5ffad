package engine_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/enginehost"
	"github.com/poolrun/poolrun/shm"
)

var remoteSquare = engine.Register("engine_test.remote.square", func(ctx context.Context, x int) (int, error) {
	time.Sleep(time.Millisecond)
	return x * x, nil
})

// shmPublisher is a window of this host's shared memory as a transport
// would hand it to Admit.
type shmPublisher struct{ w *shm.Window }

func (p shmPublisher) Publish(keys []uint64) bool {
	_, err := p.w.Publish(keys)
	return errors.Is(err, shm.ErrOverflow)
}
func (p shmPublisher) Gen() uint64       { return p.w.Gen() }
func (p shmPublisher) Publishes() uint64 { return p.w.Publishes() }
func (p shmPublisher) Close()            { p.w.Close() }

// servePipes starts a worker of Serve in a goroutine, over in-process
// pipes (as a transport across hosts would carry its streams), reading a
// window in shared memory, and returns its streams for Admit (the window
// is the caller's to give) and the window.
func servePipes(t *testing.T) (enginehost.RemoteWorker, *shm.Window) {
	t.Helper()
	win, err := shm.Create(100)
	if err != nil {
		t.Fatal(err)
	}
	jobsR, jobsW := io.Pipe()
	repR, repW := io.Pipe()
	ctlR, ctlW := io.Pipe()
	go func() {
		hooks.Serve(context.Background(), jobsR, repW, ctlR, win, nil, nil)
		repW.Close()
	}()
	return enginehost.RemoteWorker{Jobs: jobsW, Control: ctlW, Replies: repR}, win
}

// TestAdmit: a worker the pool did not start, served over streams of its
// own (in-process pipes here, as a transport across hosts would carry
// them), joins a running serial pool, takes jobs, and leaves when the pool
// ends; every result is right.
func TestAdmit(t *testing.T) {
	win, err := shm.Create(100)
	if err != nil {
		t.Fatal(err)
	}
	jobsR, jobsW := io.Pipe()
	repR, repW := io.Pipe()
	ctlR, ctlW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		err := hooks.Serve(context.Background(), jobsR, repW, ctlR, win, nil, nil)
		repW.Close()
		served <- err
	}()

	var joined enginehost.Pool
	p := engine.New(engine.Workers(0), hooks.Joiner(func(ctx context.Context, h enginehost.Pool) {
		joined = h
		if err := h.Admit(enginehost.RemoteWorker{Jobs: jobsW, Control: ctlW, Replies: repR, Window: shmPublisher{win}}); err != nil {
			t.Error(err)
		}
	}))
	var jobs []*engine.Job[int]
	for i := range 200 {
		jobs = append(jobs, engine.Queue(p, remoteSquare, i))
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := joined.Admit(enginehost.RemoteWorker{Jobs: jobsW, Control: ctlW, Replies: repR, Window: shmPublisher{win}}); err == nil {
		t.Error("Admit after Run succeeded")
	}
	for i, j := range jobs {
		if v, err := j.Result(); err != nil || v != i*i {
			t.Fatalf("job %d: %d, %v", i, v, err)
		}
	}
	st := p.Stats()
	if len(st.Workers) != 2 {
		t.Fatalf("%d workers in the stats, want 2 (serial, and the admitted one)", len(st.Workers))
	}
	if n := st.Workers[1].Jobs; n == 0 {
		t.Error("the admitted worker ran no job")
	}
	t.Logf("serial worker: %d jobs, admitted worker: %d jobs", st.Workers[0].Jobs, st.Workers[1].Jobs)
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the pool ended")
	}
}

// TestRemoteOnly: a pool that starts no worker of its own runs every job
// on the worker that joins (here 300 ms after the start, over in-process
// pipes); one that no worker joins fails with ErrNoWorkers after its
// wait, rather than waiting for ever.
func TestRemoteOnly(t *testing.T) {
	w, win := servePipes(t)
	w.Window = shmPublisher{win}
	p := engine.New(engine.RemoteOnly(10*time.Second), hooks.Joiner(func(ctx context.Context, p enginehost.Pool) {
		time.Sleep(300 * time.Millisecond)
		if err := p.Admit(w); err != nil {
			t.Error(err)
		}
	}))
	var jobs []*engine.Job[int]
	for i := range 50 {
		jobs = append(jobs, engine.Queue(p, remoteSquare, i))
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, j := range jobs {
		if v, err := j.Result(); err != nil || v != i*i {
			t.Fatalf("job %d: %d, %v", i, v, err)
		}
	}
	if st := p.Stats(); len(st.Workers) != 1 || st.Workers[0].Jobs != 50 {
		t.Errorf("workers %+v, want the one that joined, with every job", st.Workers)
	}

	lonely := engine.New(engine.RemoteOnly(300 * time.Millisecond))
	j := engine.Queue(lonely, remoteSquare, 3)
	start := time.Now()
	err := lonely.Run(context.Background())
	if !errors.Is(err, engine.ErrNoWorkers) {
		t.Fatalf("Run without workers: %v, want ErrNoWorkers", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run without workers took %v, want about 300 ms", d)
	}
	if j.Status() == engine.Succeeded || j.Status() == engine.Running {
		t.Errorf("the job is %v", j.Status())
	}
	t.Logf("without workers: %v after %v; the job is %v", err, time.Since(start).Round(time.Millisecond), j.Status())
}

// slowPublisher is a window whose first publish takes until release is
// closed (or ten seconds), as a publish across a slow network would.
type slowPublisher struct {
	shmPublisher
	entered, release chan struct{}
	busy             atomic.Bool // within the first publish
	calls            atomic.Int32
}

func (p *slowPublisher) Publish(keys []uint64) bool {
	if p.calls.Add(1) == 1 {
		p.busy.Store(true)
		close(p.entered)
		select {
		case <-p.release:
		case <-time.After(10 * time.Second):
		}
		p.busy.Store(false)
	}
	return p.shmPublisher.Publish(keys)
}

// TestPublishOffTheLock: while a window's publish is under way (one that
// would take ten seconds), Queue, Stats and Job.Cancel return before it
// ends: the pool publishes without holding its lock.
func TestPublishOffTheLock(t *testing.T) {
	w, win := servePipes(t)
	pub := &slowPublisher{shmPublisher: shmPublisher{win}, entered: make(chan struct{}), release: make(chan struct{})}
	w.Window = pub
	p := engine.New(engine.RemoteOnly(time.Minute), hooks.Joiner(func(ctx context.Context, p enginehost.Pool) {
		if err := p.Admit(w); err != nil {
			t.Error(err)
		}
	}))
	first := engine.Queue(p, remoteSquare, 2)
	var later *engine.Job[int]
	var took [3]time.Duration
	var during [3]bool // each call returned while the publish was under way
	p.Go(func(ctx context.Context) error {
		defer close(pub.release)
		select {
		case <-pub.entered:
		case <-time.After(time.Minute):
			return errors.New("the admitted worker's window was never published")
		}
		t0 := time.Now()
		later = engine.Queue(p, remoteSquare, 3)
		took[0], during[0] = time.Since(t0), pub.busy.Load()
		t0 = time.Now()
		p.Stats()
		took[1], during[1] = time.Since(t0), pub.busy.Load()
		t0 = time.Now()
		err := later.Cancel("not needed")
		took[2], during[2] = time.Since(t0), pub.busy.Load()
		return err
	})
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v, err := first.Result(); err != nil || v != 4 {
		t.Errorf("first job: %d, %v", v, err)
	}
	if later.Status() != engine.Cancelled {
		t.Errorf("the job cancelled during the publish is %v", later.Status())
	}
	for i, name := range []string{"Queue", "Stats", "Job.Cancel"} {
		if !during[i] {
			t.Errorf("%s returned after %v, once the publish had ended: it waited for it", name, took[i])
		}
	}
	t.Logf("during a publish: Queue %v, Stats %v, Job.Cancel %v", took[0], took[1], took[2])
}

// TestAdmittedAsPoolEnds: a worker admitted that has not answered the
// handshake when the run ends gets no place; the pool ends it all the
// same (Kill, and its streams closed), not leaving it, and its transport,
// waiting for an answer nobody would read.
func TestAdmittedAsPoolEnds(t *testing.T) {
	win, err := shm.Create(100)
	if err != nil {
		t.Fatal(err)
	}
	defer win.Close()
	jobsR, jobsW := io.Pipe()
	repR, repW := io.Pipe() // the worker never says anything
	defer repW.Close()
	_, ctlW := io.Pipe()
	go io.Copy(io.Discard, jobsR) // takes the handshake, as a worker would
	killed := make(chan struct{})
	p := engine.New(engine.Workers(0), hooks.Joiner(func(_ context.Context, h enginehost.Pool) {
		if err := h.Admit(enginehost.RemoteWorker{Jobs: jobsW, Control: ctlW, Replies: repR, Window: shmPublisher{win},
			Kill: func() { close(killed) }}); err != nil {
			t.Error(err)
		}
	}))
	engine.Queue(p, remoteSquare, 2)
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-killed:
	case <-time.After(10 * time.Second):
		t.Fatal("a worker admitted as the pool ended was not killed 10 s after Run returned")
	}
	// Its jobs stream is closed: the reader sees its end.
	done := make(chan error, 1)
	go func() { _, err := jobsR.Read(make([]byte, 1)); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("the jobs stream of the worker is still open")
		}
	case <-time.After(10 * time.Second):
		t.Error("the jobs stream of the worker is still open 10 s after Run returned")
	}
}
