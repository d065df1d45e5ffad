package scaffold

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the CPU time (user and system) the process has used: the
// work done, which a busy machine does not inflate as it does wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runStats is what runAll measured, in CPU time of the process.
type runStats struct {
	place      time.Duration
	placeJobs  int
	index      map[string]time.Duration // build time per source type
	indexBytes map[string]int64
	indexCells map[string]int
	connect    map[string]time.Duration // total time per rule
	conns      map[string]int
	connJobs   map[string]int
}

// runAll runs the whole workload of cfg into dir in one process, as the pool
// would: every placement job, then, per source type, one index built once and
// every connectivity job of the rules from that type. If rng is not nil the
// jobs run in a shuffled order (placement before connectivity still), with
// the index of each type built with a cell size other than the default.
func runAll(tb testing.TB, cfg *Config, dir string, rng *rand.Rand) runStats {
	tb.Helper()
	st := runStats{
		index: map[string]time.Duration{}, indexBytes: map[string]int64{}, indexCells: map[string]int{},
		connect: map[string]time.Duration{}, conns: map[string]int{}, connJobs: map[string]int{},
	}
	chunks := cfg.Chunks()
	type placeJob struct {
		typ string
		ch  Chunk
	}
	var places []placeJob
	for _, t := range cfg.CellTypes {
		for _, ch := range chunks {
			places = append(places, placeJob{t.Name, ch})
		}
	}
	if rng != nil {
		rng.Shuffle(len(places), func(i, j int) { places[i], places[j] = places[j], places[i] })
	}
	start := cpuTime()
	for _, j := range places {
		if _, err := Place(cfg, j.typ, j.ch, dir); err != nil {
			tb.Fatal(err)
		}
	}
	st.place = cpuTime() - start
	st.placeJobs = len(places)

	sources := cfg.SourceTypes()
	if rng != nil {
		rng.Shuffle(len(sources), func(i, j int) { sources[i], sources[j] = sources[j], sources[i] })
	}
	for _, typ := range sources {
		cell := 0.0 // the default
		if rng != nil {
			cell = cfg.indexCellSize(typ) * (0.5 + rng.Float64())
		}
		start := cpuTime()
		ix, err := BuildIndex(cfg, typ, dir, cell)
		if err != nil {
			tb.Fatal(err)
		}
		st.index[typ] = cpuTime() - start
		st.indexBytes[typ] = ix.Bytes()
		st.indexCells[typ] = len(ix.ids)
		type connJob struct {
			rule Rule
			ch   Chunk
		}
		var jobs []connJob
		for _, r := range cfg.RulesFrom(typ) {
			for _, ch := range chunks {
				jobs = append(jobs, connJob{r, ch})
			}
		}
		if rng != nil {
			rng.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
		}
		for _, j := range jobs {
			start := cpuTime()
			n, err := Connect(cfg, j.rule, j.ch, ix, dir)
			if err != nil {
				tb.Fatal(err)
			}
			st.connect[j.rule.Name] += cpuTime() - start
			st.conns[j.rule.Name] += n
			st.connJobs[j.rule.Name]++
		}
	}
	return st
}

// checksum is scaffold.Checksum, failing the test on error.
func checksum(tb testing.TB, cfg *Config, dir string) uint64 {
	tb.Helper()
	sum, err := Checksum(cfg, dir)
	if err != nil {
		tb.Fatal(err)
	}
	return sum
}
