package cluster

import (
	"io"
	"os"
	"testing"

	"github.com/poolrun/poolrun/cluster/hub"
)

// BenchmarkStreamRoundTrip sends a 64-byte frame (the size of a no-op
// job's) one way and has it echoed back, one at a time: over two streams
// of NATS subjects through the embedded server (each end on its own
// connection, as the pool and a worker are), and over two pipes. One op is
// one round trip; the echo runs in a goroutine of the same process, so this
// is the transport's own latency, without a second process's scheduling.
func BenchmarkStreamRoundTrip(b *testing.B) {
	b.Run("transport=nats", func(b *testing.B) {
		s, err := hub.Start("")
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		pool, worker := connect(b, s), connect(b, s)
		jobsR, err := newStreamReader(worker, "poolrun.bench.jobs")
		if err != nil {
			b.Fatal(err)
		}
		defer jobsR.Close()
		repR, err := newStreamReader(pool, "poolrun.bench.rep")
		if err != nil {
			b.Fatal(err)
		}
		defer repR.Close()
		worker.Flush()
		pool.Flush()
		jobsW := newStreamWriter(pool, "poolrun.bench.jobs")
		repW := newStreamWriter(worker, "poolrun.bench.rep")
		roundTrips(b, jobsW, jobsR, repW, repR)
	})
	b.Run("transport=pipe", func(b *testing.B) {
		jobsR, jobsW, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		repR, repW, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		defer jobsR.Close()
		defer repR.Close()
		roundTrips(b, jobsW, jobsR, repW, repR)
	})
}

// roundTrips runs b.N round trips: a frame written to jobsW is read from
// jobsR and written back to repW by an echo goroutine, and read from repR.
// It closes both writers.
func roundTrips(b *testing.B, jobsW io.WriteCloser, jobsR io.Reader, repW io.WriteCloser, repR io.Reader) {
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		for {
			if _, err := io.ReadFull(jobsR, buf); err != nil {
				repW.Close()
				if err == io.EOF {
					err = nil
				}
				done <- err
				return
			}
			if _, err := repW.Write(buf); err != nil {
				done <- err
				return
			}
		}
	}()
	frame := make([]byte, 64)
	back := make([]byte, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		frame[0] = byte(i)
		if _, err := jobsW.Write(frame); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(repR, back); err != nil {
			b.Fatal(err)
		}
		if back[0] != byte(i) {
			b.Fatalf("round trip %d came back as %d", i, back[0])
		}
	}
	b.StopTimer()
	jobsW.Close()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
