package report

import (
	"bytes"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/poolrun/poolrun/engine"
)

// Sampling while a pool runs, for the report's picture (poolrun report).
const (
	// sampleInterval is the time between two samples at the start.
	sampleInterval = 100 * time.Millisecond
	// maxSamples bounds the samples kept per worker: when a worker's
	// series reaches it, every series keeps one sample in two and the
	// interval doubles. So a series holds fewer than maxSamples samples
	// (about 60 bytes each in the report), and at least half as many
	// once the pool has run for maxSamples intervals (3.4 minutes).
	maxSamples = 2048
)

// A Sampler samples, while a pool runs, every worker's cache bytes and
// resident memory, and the items built and evicted between samples, from
// a goroutine of its own: one call of stats (Pool.Stats) and one read of
// /proc/PID/status per worker per interval. Its series belong to that
// goroutine until Stop returns.
type Sampler struct {
	stats    func() engine.Stats
	rss      func(pid int) int64
	serial   bool // the workers' figures are this process's (serial mode)
	start    time.Time
	interval time.Duration // between samples now: doubled at each halving
	limit    int           // most samples per worker: see maxSamples
	series   map[int]*workerSeries

	quit, done chan struct{}
}

// workerSeries is one worker's samples, by its index, and its counters at
// the last sample.
type workerSeries struct {
	samples           []Sample
	builds, evictions uint64
}

// newSampler returns a sampler that takes samples of stats from start, at
// most limit per worker. It does not start sampling: see StartSampler, or call take.
func newSampler(stats func() engine.Stats, serial bool, start time.Time, limit int) *Sampler {
	return &Sampler{stats: stats, rss: readRSS, serial: serial, start: start, interval: sampleInterval,
		limit: limit, series: map[int]*workerSeries{}, quit: make(chan struct{}), done: make(chan struct{})}
}

// StartSampler samples stats (Pool.Stats) every 100 ms from now until
// [Sampler.Stop], taking the times from start, when the pool started;
// serial says that the workers' figures are this process's.
func StartSampler(stats func() engine.Stats, serial bool, start time.Time) *Sampler {
	s := newSampler(stats, serial, start, maxSamples)
	go s.run()
	return s
}

func (s *Sampler) run() {
	defer close(s.done)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case now := <-t.C:
			if s.take(now) {
				t.Reset(s.interval)
			}
		}
	}
}

// Stop ends the sampling and takes a last sample, of the pool's end.
func (s *Sampler) Stop() {
	close(s.quit)
	<-s.done
	s.take(time.Now())
}

// take takes one sample of every worker at now, and reports whether it
// halved the series (and doubled the interval) to stay within its limit.
func (s *Sampler) take(now time.Time) (halved bool) {
	st := s.stats()
	t := math.Round(now.Sub(s.start).Seconds()*1000) / 1000
	for _, w := range st.Workers {
		ws := s.series[w.Index]
		if ws == nil {
			ws = &workerSeries{}
			s.series[w.Index] = ws
		}
		pid := w.PID
		if s.serial {
			pid = os.Getpid()
		}
		var rss int64
		if pid > 0 {
			rss = s.rss(pid)
		}
		c := w.Cache
		ws.samples = append(ws.samples, Sample{T: t, CacheBytes: c.Bytes, RSS: rss,
			Builds: grown(ws.builds, c.Builds), Evictions: grown(ws.evictions, c.Evictions)})
		ws.builds, ws.evictions = c.Builds, c.Evictions
		halved = halved || len(ws.samples) >= s.limit
	}
	if halved {
		for _, ws := range s.series {
			ws.samples = halve(ws.samples)
		}
		s.interval *= 2
	}
	return halved
}

// grown is how much a counter grew from was to now; 0 if it did not (a
// counter summed over a worker's processes never shrinks, but a lost
// report might make it seem to).
func grown(was, now uint64) uint64 {
	if now > was {
		return now - was
	}
	return 0
}

// halve keeps one sample in two, the later of each pair, and adds to it the
// builds and evictions of the one it drops, so that their sums stay exact;
// an odd last sample stays.
func halve(ss []Sample) []Sample {
	out := ss[:0]
	for i := 0; i < len(ss); i += 2 {
		if i+1 == len(ss) {
			out = append(out, ss[i])
			break
		}
		later := ss[i+1]
		later.Builds += ss[i].Builds
		later.Evictions += ss[i].Evictions
		out = append(out, later)
	}
	return out
}

// Samples returns worker index's samples; nil if it has none. Call it
// after Stop.
func (s *Sampler) Samples(index int) []Sample {
	if ws := s.series[index]; ws != nil {
		return ws.samples
	}
	return nil
}

// readRSS returns the resident memory of process pid (VmRSS of
// /proc/PID/status), 0 where unknown: no such process, no /proc.
func readRSS(pid int) int64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	return vmRSS(data)
}

// vmRSS finds the VmRSS line of a /proc/PID/status file, in bytes; 0 if it
// has none (a zombie's).
func vmRSS(status []byte) int64 {
	_, rest, ok := bytes.Cut(status, []byte("\nVmRSS:"))
	if !ok {
		return 0
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	num, unit, _ := bytes.Cut(bytes.TrimSpace(line), []byte(" "))
	n, err := strconv.ParseInt(string(num), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	if string(bytes.TrimSpace(unit)) == "kB" {
		n *= 1024
	}
	return n
}
