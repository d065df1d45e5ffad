package test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
)

// rendezvous is met by the jobs of meet in this process: each waits, up
// to a timeout, until the others have come.
var rendezvous struct {
	sync.Mutex
	n    int
	full chan struct{}
}

// meet waits until n jobs of meet have started in this process at once,
// and returns this process's pid; an error after 10 s.
var meet = engine.Register("test.meet", func(ctx context.Context, n int) (int, error) {
	rendezvous.Lock()
	if rendezvous.full == nil {
		rendezvous.full = make(chan struct{})
	}
	full := rendezvous.full
	if rendezvous.n++; rendezvous.n == n {
		close(full)
	}
	rendezvous.Unlock()
	select {
	case <-full:
		return os.Getpid(), nil
	case <-time.After(10 * time.Second):
		return 0, context.DeadlineExceeded
	}
})

// blobOf is a job that holds item P: it reports whether its worker's
// cache had P already.
var blobOf = engine.Register("test.blobOf", func(ctx context.Context, _ int) (bool, error) {
	had := cachepool.FromContext(ctx).Has(itemP.Key())
	_, err := itemP.Get(ctx)
	return had, err
}, engine.Uses(itemP))

// TestInProcess: InProcess(3) runs three jobs at once in this process
// (they meet), on three workers; each worker has a cache of its own,
// which builds an item once, keeps it while jobs need it and cleans it up
// at the end (as a worker process would); the statistics count them.
func TestInProcess(t *testing.T) {
	rendezvous.Lock()
	rendezvous.n, rendezvous.full = 0, nil
	rendezvous.Unlock()
	p := engine.New(engine.InProcess(3))
	var met []*engine.Job[int]
	for range 3 {
		met = append(met, engine.Queue(p, meet, 3))
	}
	var uses []*engine.Job[bool]
	for i := range 30 {
		uses = append(uses, engine.Queue(p, blobOf, i, engine.After(met[0], met[1], met[2])))
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	workers := map[int]bool{}
	for _, j := range met {
		pid, err := j.Result()
		if err != nil || pid != os.Getpid() {
			t.Fatalf("a job of three that meet: pid %d, %v; want this process's, %d", pid, err, os.Getpid())
		}
		workers[j.Worker()] = true
	}
	if len(workers) != 3 {
		t.Errorf("the three jobs that met ran on workers %v, want three", workers)
	}
	fresh := 0
	for _, j := range uses {
		had, err := j.Result()
		if err != nil {
			t.Fatal(err)
		}
		if !had {
			fresh++
		}
	}
	st := p.Stats()
	if len(st.Workers) != 3 {
		t.Fatalf("%d workers, want 3", len(st.Workers))
	}
	builds := int(st.Total().Cache.Builds)
	if builds != fresh || builds < 1 || builds > 3 {
		t.Errorf("P built %d times (the stats), %d jobs found it missing; want one build per worker that ran such a job, at most 3", builds, fresh)
	}
	for _, w := range st.Workers {
		if w.PID != os.Getpid() {
			t.Errorf("worker %d: pid %d, want this process's", w.Index, w.PID)
		}
		if w.Cache.Resident != 0 || w.Cache.Evictions != w.Cache.Builds {
			t.Errorf("worker %d: %d items still held, %d builds, %d evictions; want every item cleaned up", w.Index, w.Cache.Resident, w.Cache.Builds, w.Cache.Evictions)
		}
	}
}
