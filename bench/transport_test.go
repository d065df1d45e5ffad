package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
)

// The two designs of BenchmarkRequiredSetTransport.
const (
	// designWindow is poolrun's: jobs declare their items (engine.Needs),
	// the parent publishes the required set in the shared window when it
	// changes, and a job frame carries only the window's generation.
	designWindow = "window"
	// designMessage is the alternative, written only here: the parent
	// keeps the same reference counts, but sends the whole required set
	// inside every job message, and the worker evicts what that set does
	// not list. The engine's own eviction is off (EvictNever) and its
	// window stays empty.
	designMessage = "message"
)

var (
	// viaWindow is a job of designWindow: its argument is its number.
	viaWindow = engine.Register("bench.via-window", func(ctx context.Context, i int) (int, error) {
		_, err := residentItem.Get(ctx)
		return i, err
	})

	// viaMessage is a job of designMessage: its argument is the required
	// set, sorted, as 8 little-endian bytes per key (a []byte is what gob
	// sends cheapest: a length and the bytes, as a frame field would).
	viaMessage = engine.Register("bench.via-message", func(ctx context.Context, set []byte) (int, error) {
		required := make([]uint64, len(set)/8)
		for i := range required {
			required[i] = binary.LittleEndian.Uint64(set[8*i:])
		}
		// This design's window check: evict what the message's set does
		// not list, as EvictStale does with the window's.
		cachepool.FromContext(ctx).Evict(func(k uint64) bool {
			_, ok := slices.BinarySearch(required, k)
			return ok
		})
		_, err := residentItem.Get(ctx)
		return len(required), err
	})

	// waitFile returns once the file at path exists (or its context ends).
	waitFile = engine.Register("bench.wait-file", func(ctx context.Context, path string) (struct{}, error) {
		for {
			if _, err := os.Stat(path); err == nil {
				return struct{}{}, nil
			}
			select {
			case <-ctx.Done():
				return struct{}{}, ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
	})

	noop = engine.Register("bench.noop", func(ctx context.Context, i int) (int, error) { return i, nil })
)

// BenchmarkRequiredSetTransport compares the two ways of telling workers
// which items are still required: the shared window (poolrun's design) and
// the whole set inside every job message (see designMessage). One op is one
// job dispatched, run (it gets one resident item, after the worker's
// eviction check) and reported back.
//
// The pool holds keys required items (one of them built and resident in
// every worker; the others only listed) for its whole run, in a job that
// waits in one extra worker process until the end; a scheduler keeps
// sizes.inFlight jobs queued or running. With set=steady each job needs one
// of the held items, so the required set never changes; with set=churn each
// job needs an item of its own, so the set changes with every job (the
// window's worst case: a publish, and a snapshot in the worker, per job),
// and holds up to sizes.inFlight keys more than keys.
//
// Besides ns/op (per dispatch), it reports bytes/dispatch (what the parent
// wrote to the workers' pipes, per job) and publishes/dispatch (window
// publishes that changed the set, per job).
func BenchmarkRequiredSetTransport(b *testing.B) {
	for _, churn := range []bool{false, true} {
		set := "steady"
		if churn {
			set = "churn"
		}
		for _, k := range sizes.keys {
			for _, w := range sizes.workers {
				for _, design := range []string{designWindow, designMessage} {
					b.Run(fmt.Sprintf("set=%s/keys=%d/workers=%d/design=%s", set, k, w, design), func(b *testing.B) {
						runTransport(b, design, k, w, churn)
					})
				}
			}
		}
	}
}

func runTransport(b *testing.B, design string, keys, workers int, churn bool) {
	held := []cachepool.Handle{residentItem}
	for i := 1; i < keys; i++ {
		held = append(held, keyHandle(fmt.Sprintf("bench.held.%d", i)))
	}
	own := make([]cachepool.Handle, 2*sizes.inFlight) // churn: each job's item
	for i := range own {
		own[i] = keyHandle(fmt.Sprintf("bench.own.%d", i))
	}
	opts := []engine.Option{engine.Workers(workers + 1)} // one more for the holder's wait
	if design == designMessage {
		opts = append(opts, engine.Evict(engine.EvictNever))
	}
	p := engine.New(opts...)
	gate := filepath.Join(b.TempDir(), "gate")
	wait := engine.Queue(p, waitFile, gate)
	holder := []engine.JobOption{engine.After(wait)}
	if design == designWindow {
		holder = append(holder, engine.Needs(held...))
	}
	engine.Queue(p, noop, -1, holder...)

	var required refCounts // designMessage's parent side
	for _, h := range held {
		required.add(h.Key())
	}
	p.Go(func(ctx context.Context) error {
		// Jobs queued and not yet seen finished, oldest first, with the
		// key each needs.
		type sent struct {
			j   *engine.Job[int]
			key uint64
		}
		var ring []sent
		pop := func() error {
			select {
			case <-ring[0].j.Done():
			case <-ctx.Done():
				return ctx.Err()
			}
			if design == designMessage {
				required.drop(ring[0].key)
			}
			ring = ring[1:]
			return nil
		}
		for i := range b.N {
			if len(ring) == sizes.inFlight {
				if err := pop(); err != nil {
					return err
				}
			}
			item := held[i%keys]
			if churn {
				item = own[i%len(own)]
			}
			var j *engine.Job[int]
			switch design {
			case designWindow:
				j = engine.Queue(p, viaWindow, i, engine.Needs(item))
			case designMessage:
				required.add(item.Key())
				j = engine.Queue(p, viaMessage, required.encode())
			}
			ring = append(ring, sent{j, item.Key()})
		}
		for len(ring) > 0 {
			if err := pop(); err != nil {
				return err
			}
		}
		return os.WriteFile(gate, nil, 0o600) // the holder may finish
	})

	w0, haveIO := bytesWritten()
	b.ResetTimer()
	if err := p.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	w1, _ := bytesWritten()
	n := float64(b.N)
	if haveIO {
		b.ReportMetric(float64(w1-w0)/n, "bytes/dispatch")
	}
	b.ReportMetric(float64(p.Stats().Publishes)/n, "publishes/dispatch")
}

// refCounts is the required set as designMessage's parent keeps it: a
// count per key, as the engine does, and the set of keys with a non-zero
// count kept sorted as it changes.
type refCounts struct {
	refs map[uint64]int32
	keys []uint64 // sorted
	buf  []byte
}

func (r *refCounts) add(k uint64) {
	if r.refs == nil {
		r.refs = map[uint64]int32{}
	}
	if r.refs[k]++; r.refs[k] == 1 {
		i, _ := slices.BinarySearch(r.keys, k)
		r.keys = slices.Insert(r.keys, i, k)
	}
}

func (r *refCounts) drop(k uint64) {
	if r.refs[k]--; r.refs[k] == 0 {
		delete(r.refs, k)
		i, _ := slices.BinarySearch(r.keys, k)
		r.keys = slices.Delete(r.keys, i, i+1)
	}
}

// encode returns the set as viaMessage takes it; the buffer is reused.
func (r *refCounts) encode() []byte {
	r.buf = r.buf[:0]
	for _, k := range r.keys {
		r.buf = binary.LittleEndian.AppendUint64(r.buf, k)
	}
	return r.buf
}
