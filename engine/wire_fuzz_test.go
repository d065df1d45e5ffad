package engine

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cachepool"
)

// wireSeeds are well-formed streams: a handshake, jobs, a done and a bye.
func wireSeeds() [][]byte {
	var e enc
	e.hello(3, workerParams{policy: EvictNever, budget: 1 << 20, heartbeat: time.Second})
	e.task(&task{id: 1, gen: 4, fn: "square", arg: []byte{1, 2, 3}, keys: []uint64{5, 6}, order: []uint64{7}, timeout: time.Minute, attempt: 1})
	e.cancel(1)
	e.stop()
	a := bytes.Clone(e.b)
	e.b = e.b[:0]
	e.hello(4242, workerParams{policy: EvictStale, idle: true})
	e.done(&reply{id: 9, outcome: outcomePanic, start: time.Unix(0, 12345), elapsed: 678,
		payload: []byte("boom"), stack: []byte("goroutine 1"), evicted: 2,
		stats:        cachepool.Stats{Hits: 1, Builds: 2, Evictions: 3, Resident: 4, Bytes: 5, PeakBytes: 6, BuildTime: 7},
		residentSent: true, resident: []residentItem{{1, 10}, {2, 20}},
		items: []itemNote{{key: 1, name: "a", bytes: 10, start: time.Now(), end: time.Now()}, {key: 2, name: "b", reason: EvictedForBudget}}})
	e.state(&workerState{evicted: 1, resident: []residentItem{{3, 30}}})
	e.alive()
	e.bye(&byeInfo{stats: cachepool.Stats{Hits: 8}, peakRSS: 1 << 30})
	return [][]byte{a, bytes.Clone(e.b), nil, {0, 0, 0, 0, frameStop}, {255, 255, 255, 63, frameJob, 1}}
}

// FuzzFrames reads arbitrary bytes as a stream of frames and decodes each
// by its kind: a bad stream is an error, never a panic, a hang or an
// allocation far beyond the input.
func FuzzFrames(f *testing.F) {
	for _, s := range wireSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := newFrameReader(bytes.NewReader(data))
		for i := 0; ; i++ {
			kind, d, err := fr.next()
			if err != nil {
				return
			}
			if i == 0 || kind == frameHello {
				d.hello()
				continue
			}
			switch kind {
			case frameJob:
				d.task(new(task))
			case frameDone:
				d.done(new(reply))
			case frameState:
				d.state()
			case frameBye:
				d.bye()
			case frameCancel, frameRevoke:
				d.cancel()
			}
			if cap(fr.buf) > 2*len(data)+growStep { // it doubles as bytes arrive
				t.Fatalf("a %d-byte stream made the reader hold %d bytes", len(data), cap(fr.buf))
			}
		}
	})
}

// FuzzFrameRoundTrip encodes a task and a reply made of arbitrary fields
// and decodes them back: every field survives.
func FuzzFrameRoundTrip(f *testing.F) {
	f.Add(uint64(1), uint64(2), "square", []byte{1}, byte(0), int64(5), int64(6), []byte("x"), []byte(nil), 3, uint64(7), int64(8))
	f.Add(uint64(1<<63), uint64(0), "", []byte(nil), byte(2), int64(-1), int64(-5), []byte(nil), []byte("stack"), 0, uint64(0), int64(-8))
	f.Fuzz(func(t *testing.T, id, gen uint64, fn string, arg []byte, outcome byte, start, elapsed int64, payload, stack []byte, evicted int, hits uint64, size int64) {
		if evicted < 0 {
			evicted = -evicted
		}
		tk := task{id: id, gen: gen, fn: fn, arg: arg, timeout: time.Duration(max(elapsed, 0)), attempt: evicted % (1 << 20)}
		if len(arg) >= 8 {
			tk.keys = []uint64{id, gen}
			tk.order = []uint64{hits}
		}
		rp := reply{id: id, outcome: outcome, start: time.Unix(0, start), elapsed: time.Duration(elapsed),
			payload: payload, stack: stack, evicted: evicted, budgetEvicted: evicted / 2, overBudget: evicted%2 == 1, held: size,
			stats: cachepool.Stats{Hits: hits, Builds: gen, Resident: evicted, Bytes: size, PeakBytes: -size, BuildTime: time.Duration(start)}}
		if outcome%2 == 1 {
			rp.residentSent = true
			rp.resident = []residentItem{{id, size}, {gen, -size}}
		}
		var e enc
		e.task(&tk)
		e.done(&rp)
		if n := binary.LittleEndian.Uint32(e.b); int(n) > len(e.b)-5 {
			t.Fatalf("frame length %d past the %d bytes written", n, len(e.b))
		}
		fr := newFrameReader(bytes.NewReader(e.b))
		kind, d, err := fr.next()
		if err != nil || kind != frameJob {
			t.Fatalf("first frame: kind %d, %v", kind, err)
		}
		gotT := new(task)
		if err := d.task(gotT); err != nil {
			t.Fatal(err)
		}
		if len(gotT.arg) == 0 && len(tk.arg) == 0 {
			gotT.arg = tk.arg
		}
		if !reflect.DeepEqual(*gotT, tk) {
			t.Errorf("task %+v came back as %+v", tk, *gotT)
		}
		kind, d, err = fr.next()
		if err != nil || kind != frameDone {
			t.Fatalf("second frame: kind %d, %v", kind, err)
		}
		gotR := new(reply)
		if err := d.done(gotR); err != nil {
			t.Fatal(err)
		}
		if len(gotR.payload) == 0 && len(rp.payload) == 0 {
			gotR.payload = rp.payload
		}
		if len(gotR.stack) == 0 && len(rp.stack) == 0 {
			gotR.stack = rp.stack
		}
		if !gotR.start.Equal(rp.start) {
			t.Errorf("start %v came back as %v", rp.start, gotR.start)
		}
		gotR.start = rp.start
		if !reflect.DeepEqual(*gotR, rp) {
			t.Errorf("reply %+v came back as %+v", rp, *gotR)
		}
		if _, _, err := fr.next(); err == nil {
			t.Error("a frame after the two written")
		}
	})
}
