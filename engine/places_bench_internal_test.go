package engine

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/enginehost"
	"github.com/poolrun/poolrun/shm"
)

// The pool's cost per job as its workers grow in number: the scheduler's
// work for a dispatch round or a reply should follow what changed, not
// the number of workers.

// workerCounts are the pool sizes of BenchmarkPoolWorkers; under -short
// the two smallest.
func workerCounts() []int {
	if testing.Short() {
		return []int{2, 16}
	}
	return []int{2, 16, 100, 1_000}
}

// minJobsPerWorker is the least number of jobs of one op of
// BenchmarkPoolWorkers, per worker: enough for the workers to stream jobs
// for a while (up to 64 at a time each) between the first jobs and the last.
const minJobsPerWorker = 200

// scaleRun is what the jobs of the op of BenchmarkPoolWorkers under way
// share; the op sets it before Run.
var scaleRun atomic.Pointer[scaleState]

// scaleState is one op of BenchmarkPoolWorkers: its gate jobs wait until
// workers of them run, then the last to come takes the start's figures;
// the jobs-th no-op job to run takes the end's.
type scaleState struct {
	workers, jobs    int64
	arrived, ran     atomic.Int64
	open             chan struct{}
	startCPU, endCPU time.Duration
	start, end       time.Time
}

var (
	scaleGate = Register("engine.scale.gate", func(ctx context.Context, _ struct{}) (struct{}, error) {
		r := scaleRun.Load()
		if r.arrived.Add(1) == r.workers {
			r.startCPU, r.start = processCPU(), time.Now()
			close(r.open)
		}
		select {
		case <-r.open:
			return struct{}{}, nil
		case <-ctx.Done():
			return struct{}{}, ctx.Err()
		case <-time.After(time.Minute):
			return struct{}{}, fmt.Errorf("%d of %d workers came within a minute", r.arrived.Load(), r.workers)
		}
	})
	scaleNoop = Register("engine.scale.noop", func(ctx context.Context, i int) (int, error) {
		r := scaleRun.Load()
		if r.ran.Add(1) == r.jobs {
			r.endCPU, r.end = processCPU(), time.Now()
		}
		return i, nil
	})
)

// processCPU returns the CPU time (user and system) of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The transports of BenchmarkPoolWorkers: each makes a pool of w workers
// in this process and returns it, with what to call once it has returned.
var scaleTransports = []struct {
	name string
	pool func(b *testing.B, w int) (p *Pool, done func())
}{
	// Goroutines (InProcess), each with a window in shared memory and a
	// cache of its own, which send what they say in batches.
	{"inprocess", func(b *testing.B, w int) (*Pool, func()) {
		return New(InProcess(w)), func() {}
	}},
	// Workers of Serve over OS pipes, admitted as a transport across
	// hosts admits them (package cluster): a message per frame. (Not
	// io.Pipe: a write to it waits for the reader, and the pool's writes
	// on the control stream must not.)
	{"streams", func(b *testing.B, w int) (*Pool, func()) {
		var served sync.WaitGroup
		var wins []*shmWindow
		join := func(ctx context.Context, p enginehost.Pool) {
			for range w {
				win, err := shm.Create(100)
				if err != nil {
					b.Error(err)
					return
				}
				pub := &shmWindow{w: win}
				wins = append(wins, pub)
				var rs, ws [3]*os.File
				for i := range rs {
					if rs[i], ws[i], err = os.Pipe(); err != nil {
						b.Error(err)
						return
					}
				}
				served.Go(func() {
					serveHosted(context.Background(), rs[0], ws[1], rs[2], win, nil, nil)
					ws[1].Close()
					rs[0].Close()
					rs[2].Close()
				})
				if err := p.Admit(enginehost.RemoteWorker{Jobs: ws[0], Replies: rs[1], Control: ws[2], Window: pub}); err != nil {
					b.Error(err)
					return
				}
			}
		}
		return New(RemoteOnly(time.Minute), joiner(join)), func() {
			served.Wait()
			for _, pub := range wins {
				pub.Close() // the pool's end closed it, unless Admit failed
			}
		}
	}},
}

// BenchmarkPoolWorkers runs, per op, max(b.N, 200 w) no-op jobs on a pool of
// w workers in this process (see scaleTransports), for w from 2 to 1,000,
// and reports the process's CPU time per job ("pool-cpu-µs/job": the
// scheduler's, and the workers' own, which does not depend on w) and the
// time per job ("ns/job"), from the moment all w workers run a job (w
// gate jobs, which wait for each other; the no-op jobs come after them)
// to the end of the last no-op job: the pool at work with all its
// workers, their starts and stops left out. A pool whose scheduler scans
// every worker per dispatch round or per reply costs more per job the
// more workers it has.
func BenchmarkPoolWorkers(b *testing.B) {
	for _, tr := range scaleTransports {
		for _, w := range workerCounts() {
			b.Run(fmt.Sprintf("transport=%s/workers=%d", tr.name, w), func(b *testing.B) {
				n := max(b.N, minJobsPerWorker*w)
				r := &scaleState{workers: int64(w), jobs: int64(n), open: make(chan struct{})}
				scaleRun.Store(r)
				defer scaleRun.Store(nil)
				p, done := tr.pool(b, w)
				gates := make([]Dep, w)
				for i := range gates {
					gates[i] = Queue(p, scaleGate, struct{}{})
				}
				// One more gate job after them (it passes at once), and the
				// no-op jobs after it: n+w edges rather than n·w.
				after := After(Queue(p, scaleGate, struct{}{}, After(gates...)))
				for i := range n {
					Queue(p, scaleNoop, i, after)
				}
				err := p.Run(context.Background())
				done()
				if err != nil {
					b.Fatal(err)
				}
				if got := r.ran.Load(); got != int64(n) {
					b.Fatalf("%d no-op jobs ran, want %d", got, n)
				}
				b.ReportMetric(float64((r.endCPU-r.startCPU).Nanoseconds())/1e3/float64(n), "pool-cpu-µs/job")
				b.ReportMetric(float64(r.end.Sub(r.start).Nanoseconds())/float64(n), "ns/job")
			})
		}
	}
}

// The scheduler alone, with many places: its loop driven by hand, one
// reply at a time, over links that only record what they are sent.

// countWindow is a window that counts its publishes and lists nothing.
type countWindow struct{ gen uint64 }

func (w *countWindow) Publish([]uint64) bool { w.gen++; return false }
func (w *countWindow) Gen() uint64           { return w.gen }
func (w *countWindow) Publishes() uint64     { return w.gen }
func (w *countWindow) Close()                {}

// queueLink is a worker that holds the tasks it is sent, in order, until
// the benchmark replies to the first.
type queueLink struct{ tasks []uint64 }

func (l *queueLink) send(tasks []task) {
	for _, t := range tasks {
		l.tasks = append(l.tasks, t.id)
	}
}
func (l *queueLink) stop()                   {}
func (l *queueLink) terminate(time.Duration) {}
func (l *queueLink) pid() int                { return 0 }
func (l *queueLink) cancel(uint64)           {}
func (l *queueLink) revoke(uint64, uint64)   {}

// queueTransport starts queueLinks, which answer the handshake at once.
type queueTransport struct {
	links []*queueLink
	hello []msg
}

func (t *queueTransport) start(int, windowPublisher) (link, error) {
	l := &queueLink{}
	t.links = append(t.links, l)
	t.hello = append(t.hello, msg{from: l, hello: &hello{pid: len(t.links)}})
	return l, nil
}
func (t *queueTransport) newWindow() (windowPublisher, error) { return &countWindow{}, nil }
func (t *queueTransport) close()                              {}

// BenchmarkSchedulerReply measures the scheduler's work per reply with w
// places (2 to 1,000, see workerCounts) whose workers stream no-op jobs:
// one op takes one reply (a job that began and ended in a microsecond)
// and runs one turn of the loop after it, as the loop does when replies
// come one at a time (the checks, the dispatch of the next job, the
// windows, the memory figures). It reports "ns/reply"; a scheduler that
// scans every place per reply or per round costs more the more places it
// has.
func BenchmarkSchedulerReply(b *testing.B) {
	for _, w := range workerCounts() {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			p := New(Workers(w))
			// Enough jobs to fill every worker (maxInFlight at most) and
			// run b.N more.
			for i := range b.N + w*maxInFlight {
				Queue(p, benchFn, i)
			}
			tr := &queueTransport{}
			s := newScheduler(p, tr, nil)
			p.mu.Lock()
			p.state = PoolStarting
			p.mu.Unlock()
			if err := s.start(w, w); err != nil {
				b.Fatal(err)
			}
			turn := func(m *msg) {
				p.mu.Lock()
				now := time.Now()
				if m != nil {
					s.handle(*m, now)
					s.account(now)
				}
				s.checkHandshakes(now)
				s.checkRunning(now)
				s.checkWorkers(now)
				s.dispatch()
				s.grow()
				s.collect()
				starts := s.starts
				s.starts = nil
				s.nextCheck(now)
				p.mu.Unlock()
				s.deliver()
				if len(starts) > 0 {
					s.startWorkers(starts)
				}
			}
			// Start the workers, say hello, and fill them.
			turn(nil)
			for _, m := range tr.hello {
				turn(&m)
			}
			if len(tr.links) != w {
				b.Fatalf("%d workers started, want %d", len(tr.links), w)
			}
			for range 2 * maxInFlight {
				turn(nil)
			}
			elapsed := (&reply{outcome: outcomeOK, elapsed: time.Microsecond})
			b.ResetTimer()
			for i := range b.N {
				l := tr.links[i%w]
				if len(l.tasks) == 0 {
					b.Fatalf("reply %d: worker %d has no job", i, i%w+1)
				}
				rep := *elapsed
				rep.id = l.tasks[0]
				l.tasks = l.tasks[1:]
				turn(&msg{from: l, notes: []note{{started: rep.id, ended: true, done: rep}}})
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/reply")
		})
	}
}
