package bench

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
)

// undeclaredItems are three items of 4 MiB each, filled when built (a
// build costs a few milliseconds), that undeclaredUse gets without
// declaring them and declaredUse declares.
var undeclaredItems = func() (its [3]*cachepool.Item[[]byte]) {
	for i := range its {
		its[i] = cachepool.Define(fmt.Sprintf("bench.undeclared-%d", i), func(context.Context) ([]byte, error) {
			b := make([]byte, 4<<20)
			for j := range b {
				b[j] = byte(j)
			}
			return b, nil
		}, cachepool.Size(func(b []byte) int64 { return int64(len(b)) }))
	}
	return its
}()

func getUndeclared(ctx context.Context, i int) (int, error) {
	n := i
	for _, it := range undeclaredItems {
		b, err := it.Get(ctx)
		if err != nil {
			return 0, err
		}
		n += int(b[i%len(b)])
	}
	return n, nil
}

var (
	undeclaredUse = engine.Register("bench.undeclared-use", getUndeclared)
	declaredUse   = engine.Register("bench.declared-use", getUndeclared,
		engine.Uses(undeclaredItems[0], undeclaredItems[1], undeclaredItems[2]))
)

// BenchmarkUndeclaredItems runs the program of a library user who forgot
// to declare the items: 100 jobs (20 under -short), all queued at once, that
// get three items each, on 2 worker processes; an op is the whole run. It
// reports the builds and hits per run, with learning on (the default),
// off (LearnItems(false)), and with the items declared (Uses), for
// comparison.
func BenchmarkUndeclaredItems(b *testing.B) {
	n := 100
	if testing.Short() {
		n = 20
	}
	args := make([]int, n)
	for i := range args {
		args[i] = i
	}
	cases := []struct {
		name string
		fn   *engine.Func[int, int]
		opts []engine.Option
	}{
		{"learning=on", undeclaredUse, nil},
		{"learning=off", undeclaredUse, []engine.Option{engine.LearnItems(false)}},
		{"declared", declaredUse, nil},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var builds, hits uint64
			for b.Loop() {
				p := engine.New(append(c.opts, engine.Workers(2), engine.WorkerOutput(io.Discard, io.Discard))...)
				engine.Map(p, c.fn, args)
				if err := p.Run(context.Background()); err != nil {
					b.Fatal(err)
				}
				for _, ws := range p.Stats().Workers {
					builds += ws.Cache.Builds
					hits += ws.Cache.Hits
				}
			}
			b.ReportMetric(float64(builds)/float64(b.N), "builds/op")
			b.ReportMetric(float64(hits)/float64(b.N), "hits/op")
		})
	}
}
