package test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/engine"
)

// sized returns a result of n bytes.
var sized = engine.Register("test.sized", func(ctx context.Context, n int) ([]byte, error) {
	return make([]byte, n), nil
})

// takes returns the length of its argument.
var takes = engine.Register("test.takes", func(ctx context.Context, b []byte) (int, error) {
	return len(b), nil
})

// TestValueLimits: arguments and results up to the limit pass; larger ones
// fail that job with ErrTooLarge, and the pool goes on. The limit here is
// 1 MiB; TestValueLimitDefault checks the default's 64 MiB.
func TestValueLimits(t *testing.T) {
	modes(t, func(t *testing.T, tr transport) {
		checkValueLimits(t, tr.New(t, engine.MaxValueSize(1<<20)), 1<<20)
	})
}

// TestValueLimitDefault: values of up to 64 MiB pass by default, larger
// ones fail their job. (Not under the race detector, whose shadow memory
// makes 64 MiB values take minutes.)
func TestValueLimitDefault(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("64 MiB values: slow under -race and -short")
	}
	checkValueLimits(t, engine.New(engine.Workers(2)), engine.DefaultMaxValueSize)
}

func checkValueLimits(t *testing.T, p *engine.Pool, limit int) {
	t.Helper()
	// gob adds a few bytes to a []byte: leave room for them.
	bigArg := engine.Queue(p, takes, make([]byte, limit-64))
	tooBigArg := engine.Queue(p, takes, make([]byte, limit+1))
	bigRes := engine.Queue(p, sized, limit-64)
	tooBigRes := engine.Queue(p, sized, limit+1)
	after := engine.Queue(p, square, 9, engine.After(bigArg, bigRes))
	err := p.Run(context.Background())
	if !errors.Is(err, engine.ErrTooLarge) {
		t.Errorf("Run: %v, want ErrTooLarge", err)
	}
	if n, err := bigArg.Result(); err != nil || n != limit-64 {
		t.Errorf("argument just under the limit: %d, %v", n, err)
	}
	if b, err := bigRes.Result(); err != nil || len(b) != limit-64 {
		t.Errorf("result just under the limit: %d bytes, %v", len(b), err)
	}
	if tooBigArg.Status() != engine.Failed || tooBigRes.Status() != engine.Failed {
		t.Errorf("jobs over the limit: argument %v, result %v; want both failed", tooBigArg.Status(), tooBigRes.Status())
	}
	_, aerr := tooBigArg.Result()
	_, rerr := tooBigRes.Result()
	for _, e := range []error{aerr, rerr} {
		if e == nil || !strings.Contains(e.Error(), fmt.Sprintf("the limit is %d", limit)) {
			t.Errorf("error %v does not name the limit", e)
		}
	}
	if !errors.Is(aerr, engine.ErrTooLarge) {
		t.Errorf("argument error %v does not wrap ErrTooLarge", aerr)
	}
	if v, err := after.Result(); err != nil || v != 81 {
		t.Errorf("a job after the large ones: %d, %v", v, err)
	}
}

// TestArgumentsReleased: the pool drops a job's encoded argument once the
// job has ended, so 20 jobs with 1 MiB arguments do not keep 20 MiB alive
// after Run, though the jobs themselves are still held.
func TestArgumentsReleased(t *testing.T) {
	modes(t, func(t *testing.T, tr transport) {
		heap := func() uint64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		before := heap()
		p := tr.New(t)
		const n, size = 20, 1 << 20
		var jobs []*engine.Job[int]
		for range n {
			jobs = append(jobs, engine.Queue(p, takes, make([]byte, size)))
		}
		if err := p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		grew := int64(heap()) - int64(before)
		for _, j := range jobs {
			if got, err := j.Result(); err != nil || got != size {
				t.Fatalf("job %d: %d, %v", j.ID(), got, err)
			}
		}
		t.Logf("the heap grew by %d MiB across the pool", grew>>20)
		// Over the cluster the heap also holds, until the server closes
		// after the test, the buffers of the embedded server and of the
		// pool's connection for the 1 MiB messages (2 to 10 MiB seen).
		bound := n * size * 3 / 8
		if tr.remote > 0 {
			bound = n * size * 3 / 4
		}
		if grew > int64(bound) {
			t.Errorf("after Run the heap holds %d MiB more than before: the arguments (%d MiB) were kept", grew>>20, n*size>>20)
		}
	})
}
