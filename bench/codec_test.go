package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/poolrun/poolrun/engine"
)

// command is a job argument of the shape of poolrun run's (a command, its
// job's id, file and line, folder and environment): gobArg travels with
// encoding/gob, binArg with its own MarshalBinary (engine.Func).
type command struct {
	ID, Run, File, Dir string
	Line               int
	Env                []string
}

type gobArg command

type binArg command

func (a binArg) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 128)
	for _, s := range append([]string{a.ID, a.Run, a.File, a.Dir}, a.Env...) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return binary.AppendVarint(b, int64(a.Line)), nil
}

func (a *binArg) UnmarshalBinary(b []byte) error {
	var strs []string
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			break
		}
		strs = append(strs, string(b[k:k+int(n)]))
		b = b[k+int(n):]
	}
	line, k := binary.Varint(b)
	if len(strs) < 4 || k != len(b) {
		return errors.New("bench: bad binArg")
	}
	*a = binArg{ID: strs[0], Run: strs[1], File: strs[2], Dir: strs[3], Line: int(line), Env: strs[4:]}
	return nil
}

var (
	gobJob = engine.Register("bench.codec-gob", func(ctx context.Context, a gobArg) (int, error) { return a.Line, nil })
	binJob = engine.Register("bench.codec-binary", func(ctx context.Context, a binArg) (int, error) { return a.Line, nil })
)

// BenchmarkCodec runs b.N no-op jobs whose argument is a command (its id,
// text, file, line, folder and environment) on one worker, the argument
// travelling with encoding/gob or with its own MarshalBinary
// (engine.Func): per job, gob describes the type and the worker compiles
// a decoder for it. jobs/s, and B/op and allocs/op of the parent.
func BenchmarkCodec(b *testing.B) {
	c := command{ID: "job-17", Run: "cc -O2 -c src/job-17.c -o obj/job-17.o", File: "build.yaml", Dir: "/home/user/project",
		Line: 42, Env: []string{"CC=gcc", "CFLAGS=-Wall"}}
	for _, codec := range []string{"gob", "binary"} {
		b.Run("codec="+codec, func(b *testing.B) {
			p := engine.New(engine.Workers(1))
			var check func() int
			if codec == "gob" {
				jobs := make([]*engine.Job[int], b.N)
				for i := range b.N {
					jobs[i] = engine.Queue(p, gobJob, gobArg(c))
				}
				check = func() int { v, _ := jobs[b.N-1].Result(); return v }
			} else {
				jobs := make([]*engine.Job[int], b.N)
				for i := range b.N {
					jobs[i] = engine.Queue(p, binJob, binArg(c))
				}
				check = func() int { v, _ := jobs[b.N-1].Result(); return v }
			}
			b.ReportAllocs()
			b.ResetTimer()
			if err := p.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if got := check(); got != c.Line {
				b.Fatalf("the last job returned %d, want %d: the argument did not arrive whole", got, c.Line)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
