package report

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
)

// fakePool is a pool's figures that a test changes between samples.
type fakePool struct{ st engine.Stats }

func (f *fakePool) stats() engine.Stats { return f.st }

func (f *fakePool) set(index, pid int, bytes int64, builds, evictions uint64) {
	for i := range f.st.Workers {
		if f.st.Workers[i].Index == index {
			f.st.Workers[i].PID = pid
			f.st.Workers[i].Cache = cachepool.Stats{Bytes: bytes, Builds: builds, Evictions: evictions}
			return
		}
	}
	f.st.Workers = append(f.st.Workers, engine.WorkerStats{Index: index, PID: pid,
		Cache: cachepool.Stats{Bytes: bytes, Builds: builds, Evictions: evictions}})
}

// Each sample holds the worker's cache bytes, its process's RSS and the
// builds and evictions since the sample before; a replaced worker's new
// pid is read; a worker that appears later gets a series of its own.
func TestSamplerTake(t *testing.T) {
	var fp fakePool
	start := time.Unix(1000, 0)
	s := newSampler(fp.stats, false, start, 100)
	s.rss = func(pid int) int64 { return int64(pid) * 1000 }
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }

	s.take(at(50)) // no workers yet
	fp.set(1, 7, 0, 0, 0)
	s.take(at(100))
	fp.set(1, 7, 500, 2, 0)
	s.take(at(200))
	fp.set(1, 8, 200, 3, 4) // replaced: a new pid
	fp.set(2, 9, 50, 1, 0)
	s.take(at(300))
	fp.set(1, 0, 0, 3, 5) // gone: RSS unknown
	s.take(at(400))

	want1 := []Sample{
		{T: 0.1, RSS: 7000},
		{T: 0.2, CacheBytes: 500, RSS: 7000, Builds: 2},
		{T: 0.3, CacheBytes: 200, RSS: 8000, Builds: 1, Evictions: 4},
		{T: 0.4, Evictions: 1},
	}
	want2 := []Sample{
		{T: 0.3, CacheBytes: 50, RSS: 9000, Builds: 1},
		{T: 0.4, CacheBytes: 50, RSS: 9000},
	}
	for _, tt := range []struct {
		index int
		want  []Sample
	}{{1, want1}, {2, want2}, {3, nil}} {
		got := s.Samples(tt.index)
		if len(got) != len(tt.want) {
			t.Fatalf("worker %d: %d samples, want %d: %+v", tt.index, len(got), len(tt.want), got)
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("worker %d, sample %d: %+v, want %+v", tt.index, i, got[i], tt.want[i])
			}
		}
	}
}

// A counter that seems to shrink (a lost report) counts no negative
// moment, and the next growth counts from where it is.
func TestSamplerCounterShrinks(t *testing.T) {
	var fp fakePool
	start := time.Unix(1000, 0)
	s := newSampler(fp.stats, false, start, 100)
	s.rss = func(int) int64 { return 0 }
	for i, b := range []uint64{3, 1, 2} {
		fp.set(1, 1, 0, b, 0)
		s.take(start.Add(time.Duration(i) * time.Second))
	}
	var got []uint64
	for _, smp := range s.Samples(1) {
		got = append(got, smp.Builds)
	}
	if len(got) != 3 || got[0] != 3 || got[1] != 0 || got[2] != 1 {
		t.Errorf("builds per sample %v, want [3 0 1]", got)
	}
}

// At its limit a series keeps one sample in two, the later of each pair,
// with the builds and evictions of both; the interval doubles, and the
// series never reaches the limit.
func TestSamplerHalves(t *testing.T) {
	const limit, n = 8, 1000
	var fp fakePool
	start := time.Unix(1000, 0)
	s := newSampler(fp.stats, false, start, limit)
	s.rss = func(int) int64 { return 1 }
	halvings := 0
	for i := 1; i <= n; i++ {
		fp.set(1, 1, int64(i), uint64(i), uint64(i/2))
		if s.take(start.Add(time.Duration(i) * time.Millisecond)) {
			halvings++
		}
		if got := len(s.Samples(1)); got >= limit {
			t.Fatalf("after %d samples the series holds %d, the limit is %d", i, got, limit)
		}
	}
	ss := s.Samples(1)
	var builds, evictions uint64
	for i, smp := range ss {
		builds += smp.Builds
		evictions += smp.Evictions
		if i > 0 && smp.T <= ss[i-1].T {
			t.Errorf("sample %d at %v, after %v", i, smp.T, ss[i-1].T)
		}
	}
	if builds != n || evictions != n/2 {
		t.Errorf("the samples count %d builds and %d evictions, want %d and %d", builds, evictions, n, n/2)
	}
	if last := ss[len(ss)-1]; last.T != 1 || last.CacheBytes != n {
		t.Errorf("the last sample %+v: want the one at 1 s", last)
	}
	if want := sampleInterval << halvings; s.interval != want || halvings == 0 {
		t.Errorf("interval %v after %d halvings, want %v", s.interval, halvings, want)
	}
}

// In serial mode the worker is this process: its RSS is read whatever
// the pid the pool states.
func TestSamplerSerial(t *testing.T) {
	var fp fakePool
	fp.set(1, 0, 0, 0, 0)
	s := newSampler(fp.stats, true, time.Now(), 10)
	var read int
	s.rss = func(pid int) int64 { read = pid; return 1 }
	s.take(time.Now())
	if read != os.Getpid() {
		t.Errorf("read the RSS of pid %d, want this process's (%d)", read, os.Getpid())
	}
}

// StartSampler's goroutine samples until Stop, which takes the last
// sample of the end.
func TestSamplerStartStop(t *testing.T) {
	var fp fakePool
	fp.set(1, os.Getpid(), 10, 1, 0)
	s := StartSampler(fp.stats, false, time.Now())
	s.Stop()
	ss := s.Samples(1)
	if len(ss) == 0 || ss[0].Builds != 1 {
		t.Fatalf("samples %+v: want at least the last one, with the build", ss)
	}
}

func TestVMRSS(t *testing.T) {
	for _, tt := range []struct {
		name, status string
		want         int64
	}{
		{"kB", "Name:\tx\nVmHWM:\t  9 kB\nVmRSS:\t    1732 kB\nVmData:\t 360 kB\n", 1732 * 1024},
		{"last line", "Name:\tx\nVmRSS:\t12 kB", 12 * 1024},
		{"no unit", "Name:\tx\nVmRSS:\t12\n", 12},
		{"none (a zombie)", "Name:\tx\nState:\tZ (zombie)\n", 0},
		{"not a number", "Name:\tx\nVmRSS:\tlots kB\n", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := vmRSS([]byte(tt.status)); got != tt.want {
				t.Errorf("vmRSS = %d, want %d", got, tt.want)
			}
		})
	}
	if runtime.GOOS == "linux" {
		if got := readRSS(os.Getpid()); got <= 0 {
			t.Errorf("readRSS(this process) = %d, want its resident memory", got)
		}
	}
	if got := readRSS(-1); got != 0 {
		t.Errorf("readRSS(-1) = %d, want 0", got)
	}
}
