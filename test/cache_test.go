package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
)

// envLog names the file that jobs, builds and cleanups append lines to; the
// tests set it before the workers start, and the workers inherit it.
const envLog = "POOLRUN_TEST_LOG"

// logLine appends a line to the log file, suffixed with this process's id
// when perPID (one file per worker, as in BSB's test).
func logLine(perPID bool, format string, args ...any) {
	path := os.Getenv(envLog)
	if path == "" {
		return
	}
	if perPID {
		path = fmt.Sprintf("%s.%d", path, os.Getpid())
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	fmt.Fprintf(f, format+"\n", args...)
}

// blob is a cache item's value: some memory, to be measured.
type blob struct{ data []byte }

func defineBlob(name string, perPID bool) *cachepool.Item[*blob] {
	return cachepool.Define(name,
		func(ctx context.Context) (*blob, error) {
			logLine(perPID, "build %s", name)
			return &blob{data: make([]byte, 1<<20)}, nil
		},
		cachepool.Cleanup(func(b *blob) { logLine(perPID, "cleanup %s", name) }),
		cachepool.Size(func(b *blob) int64 { return int64(len(b.data)) }),
	)
}

var (
	itemX = defineBlob("test.X", true)
	itemP = defineBlob("test.P", false)
	itemQ = defineBlob("test.Q", false)
	items = map[string]*cachepool.Item[*blob]{"test.X": itemX, "test.P": itemP, "test.Q": itemQ}
)

// use is a job that gets the named items and logs that it ran.
type use struct {
	Name  string
	Items []string
}

var useItems = engine.Register("test.use", func(ctx context.Context, u use) (string, error) {
	for _, name := range u.Items {
		if _, err := items[name].Get(ctx); err != nil {
			return "", err
		}
	}
	logLine(false, "run %s", u.Name)
	return u.Name, nil
})

// resident reports whether X is in the cache of the worker running the job.
var resident = engine.Register("test.resident", func(ctx context.Context, _ struct{}) (bool, error) {
	return cachepool.FromContext(ctx).Has(itemX.Key()), nil
}, engine.Uses()) // declares no item

// TestCacheSurvival is BSB's test: a job with no item, then four jobs that
// need X and depend on it, then a job with no item that depends on those
// four. X is built at most once per worker, cleaned up exactly once per
// build, and gone from the last job's worker when that job runs.
func TestCacheSurvival(t *testing.T) {
	modes(t, func(t *testing.T, tr transport) {
		logPath := filepath.Join(t.TempDir(), "log")
		t.Setenv(envLog, logPath)
		p := tr.New(t)
		first := engine.Queue(p, useItems, use{Name: "first"})
		var mid []engine.Dep
		for i := range 4 {
			mid = append(mid, engine.Queue(p, useItems, use{Name: fmt.Sprint("x", i), Items: []string{"test.X"}},
				engine.Needs(itemX), engine.After(first)))
		}
		last := engine.Queue(p, resident, struct{}{}, engine.After(mid...))
		if err := p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if held, err := last.Result(); err != nil || held {
			t.Errorf("last job: X resident = %v (%v), want false", held, err)
		}
		logs, _ := filepath.Glob(logPath + ".*")
		if len(logs) == 0 {
			t.Fatal("no worker built X")
		}
		builds := 0
		for _, f := range logs {
			data, _ := os.ReadFile(f)
			lines := strings.Fields(strings.ReplaceAll(string(data), "test.X", ""))
			b, c := count(lines, "build"), count(lines, "cleanup")
			if b > 1 {
				t.Errorf("%s: X built %d times in one worker", filepath.Base(f), b)
			}
			if c != b {
				t.Errorf("%s: %d builds, %d cleanups; want one cleanup per build", filepath.Base(f), b, c)
			}
			builds += b
		}
		st := p.Stats()
		misses, evictions := st.Total().Cache.Builds, st.Total().Cache.Evictions
		for _, w := range st.Workers {
			if w.Cache.Resident != 0 {
				t.Errorf("worker %d still holds %d items at the end", w.Index, w.Cache.Resident)
			}
			if w.Cache.Builds > 0 && w.Cache.PeakBytes != 1<<20 {
				t.Errorf("worker %d: peak %d bytes, want %d", w.Index, w.Cache.PeakBytes, 1<<20)
			}
		}
		if misses != uint64(builds) || evictions != uint64(builds) {
			t.Errorf("stats: %d builds and %d evictions, the log has %d builds", misses, evictions, builds)
		}
		t.Logf("%d worker(s) built X; stats %+v", builds, st.Workers)
	})
}

func count(lines []string, w string) int {
	n := 0
	for _, l := range lines {
		if l == w {
			n++
		}
	}
	return n
}

// agreementPool queues, on a pool over tr, a chain in which items P and Q
// come and go: A(P) -> B(P,Q) -> C(Q) -> D() -> E(P).
func agreementPool(t *testing.T, tr transport) (*engine.Pool, *recorder, []*engine.Job[string]) {
	rec := &recorder{}
	p := tr.New(t, engine.OnEvent(rec.add))
	return p, rec, queuePolicyChain(p)
}

// TestSerialParallelAgree runs the same pool serially, with one and two
// local workers, and with one and three remote workers over the cluster:
// the status sequences of every job agree, and so (serially, with one
// local worker and with one remote one) does the log of builds, runs and
// cleanups, which is exactly what the window implies.
func TestSerialParallelAgree(t *testing.T) {
	type outcome struct {
		statuses map[int][]engine.Status
		log      []string
		results  []string
	}
	run := func(tr transport) outcome {
		var o outcome
		t.Run(tr.name, func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "log")
			t.Setenv(envLog, logPath)
			p, rec, jobs := agreementPool(t, tr)
			if err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(logPath)
			o = outcome{statuses: rec.statuses(t), log: strings.Split(strings.TrimSpace(string(data)), "\n")}
			for _, j := range jobs {
				v, _ := j.Result()
				o.results = append(o.results, v)
			}
		})
		return o
	}
	serial, one, two := run(serialTransport), run(transport{name: "one worker", workers: 1}), run(pipesTransport)
	remoteOne, remoteThree := run(transport{name: "cluster, one worker", remote: 1}), run(clusterTransport)
	wantLog := []string{
		"build test.P", "run A",
		"build test.Q", "run B",
		"run C", // P stays: E still needs it
		"cleanup test.Q", "run D",
		"run E",
		"cleanup test.P", // at the end of the pool
	}
	if !slices.Equal(serial.log, wantLog) {
		t.Errorf("serial log:\n%s\nwant:\n%s", strings.Join(serial.log, "\n"), strings.Join(wantLog, "\n"))
	}
	for name, o := range map[string]outcome{"one worker": one, "one remote worker": remoteOne} {
		if !slices.Equal(o.log, serial.log) {
			t.Errorf("%s: the log differs from the serial one:\n%s", name, strings.Join(o.log, "\n"))
		}
	}
	for name, o := range map[string]outcome{"one worker": one, "two workers": two, "one remote worker": remoteOne, "three remote workers": remoteThree} {
		if !slices.Equal(o.results, serial.results) {
			t.Errorf("%s: results %v, serial %v", name, o.results, serial.results)
		}
		for id, s := range serial.statuses {
			if !slices.Equal(o.statuses[id], s) {
				t.Errorf("%s: job %d went through %v, serially %v", name, id, o.statuses[id], s)
			}
		}
	}
	for id, s := range serial.statuses {
		if want := []engine.Status{engine.Pending, engine.Queued, engine.Running, engine.Succeeded}; !slices.Equal(s, want) {
			t.Errorf("job %d: %v, want %v", id, s, want)
		}
	}
}
