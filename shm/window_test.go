package shm_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/shm"
)

func create(t testing.TB, capacity int) *shm.Window {
	t.Helper()
	w, err := shm.Create(capacity)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func open(t testing.TB, w *shm.Window) *shm.Window {
	t.Helper()
	r, err := shm.Open(w.File())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func snapshot(t testing.TB, w *shm.Window) shm.Snapshot {
	t.Helper()
	s, err := w.Snapshot(nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func seq(from, n int) []uint64 {
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = uint64(from + i)
	}
	return keys
}

func TestPublishSnapshot(t *testing.T) {
	tests := []struct {
		name     string
		capacity int
		keys     []uint64
		want     []uint64
	}{
		{name: "empty", capacity: 10, keys: nil, want: []uint64{}},
		{name: "one", capacity: 10, keys: []uint64{42}, want: []uint64{42}},
		{name: "unsorted with duplicates", capacity: 4, keys: []uint64{9, 3, 9, 7, 3, 1}, want: []uint64{1, 3, 7, 9}},
		{name: "full default window", capacity: 0, keys: seq(1, shm.DefaultCapacity), want: seq(1, shm.DefaultCapacity)},
		{name: "largest keys", capacity: 2, keys: []uint64{^uint64(0), ^uint64(0) - 1}, want: []uint64{^uint64(0) - 1, ^uint64(0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := create(t, tt.capacity)
			if tt.capacity == 0 && w.Capacity() != shm.DefaultCapacity {
				t.Fatalf("Capacity() = %d, want %d", w.Capacity(), shm.DefaultCapacity)
			}
			orig := slices.Clone(tt.keys)
			gen, err := w.Publish(tt.keys)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(tt.keys, orig) {
				t.Errorf("Publish modified its argument: %v, was %v", tt.keys, orig)
			}
			for _, reader := range []*shm.Window{w, open(t, w)} {
				s := snapshot(t, reader)
				if s.Overflow {
					t.Error("Overflow set")
				}
				if !slices.Equal(s.Keys, tt.want) {
					t.Errorf("Keys = %v, want %v", s.Keys, tt.want)
				}
				if s.Gen != gen || reader.Gen() != gen {
					t.Errorf("snapshot Gen %d, Gen() %d, want %d", s.Gen, reader.Gen(), gen)
				}
				for _, k := range tt.want {
					if !s.Contains(k) {
						t.Errorf("Contains(%d) = false", k)
					}
				}
				for _, k := range []uint64{0, 2, 5, 8, 10000, ^uint64(0) - 2} {
					if !slices.Contains(tt.want, k) && s.Contains(k) {
						t.Errorf("Contains(%d) = true", k)
					}
				}
			}
		})
	}
}

func TestGeneration(t *testing.T) {
	w := create(t, 8)
	r := open(t, w)
	if g := w.Gen(); g != 0 {
		t.Fatalf("new window: Gen() = %d, want 0", g)
	}
	steps := []struct {
		keys    []uint64
		changed bool
	}{
		{[]uint64{1, 2}, true},
		{[]uint64{2, 1}, false}, // the same set in another order
		{[]uint64{1, 2, 2}, false},
		{[]uint64{1, 2, 3}, true},
		{[]uint64{1, 2}, true},
		{nil, true},
		{[]uint64{}, false},
		{[]uint64{5}, true},
	}
	last := w.Gen()
	for i, st := range steps {
		gen, err := w.Publish(st.keys)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case gen%2 != 0:
			t.Errorf("step %d: odd generation %d", i, gen)
		case st.changed && gen <= last:
			t.Errorf("step %d %v: generation %d, want more than %d", i, st.keys, gen, last)
		case !st.changed && gen != last:
			t.Errorf("step %d %v (same set): generation %d, want it unchanged at %d", i, st.keys, gen, last)
		}
		if g := r.Gen(); g != gen {
			t.Errorf("step %d: reader Gen() = %d, want %d", i, g, gen)
		}
		last = gen
	}
	if got, want := w.Publishes(), uint64(5); got != want {
		t.Errorf("Publishes() = %d, want %d", got, want)
	}
}

// TestPublishAt: a window that mirrors another takes that one's
// generations: the set and the generation are published together, an
// unchanged set still moves the generation (a waiter for it wakes), and a
// generation that is odd or not above the window's is refused with
// nothing published.
func TestPublishAt(t *testing.T) {
	w := create(t, 8)
	r := open(t, w)
	if gen, err := w.PublishAt([]uint64{3, 1}, 10); err != nil || gen != 10 {
		t.Fatalf("PublishAt at 10: %d, %v", gen, err)
	}
	woke := make(chan uint64, 1)
	go func() {
		g, _ := r.WaitGen(14, time.Now().Add(time.Minute))
		woke <- g
	}()
	if gen, err := w.PublishAt([]uint64{1, 3}, 14); err != nil || gen != 14 {
		t.Fatalf("PublishAt of the same set at 14: %d, %v", gen, err)
	}
	select {
	case g := <-woke:
		if g != 14 {
			t.Errorf("the waiter for 14 woke at %d", g)
		}
	case <-time.After(time.Minute):
		t.Fatal("the waiter for generation 14 was not woken")
	}
	for _, gen := range []uint64{0, 15, 14, 12} {
		if _, err := w.PublishAt([]uint64{7}, gen); !errors.Is(err, shm.ErrGeneration) {
			t.Errorf("PublishAt at %d (the window at 14): %v, want ErrGeneration", gen, err)
		}
	}
	s, err := r.Snapshot(nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Gen != 14 || !slices.Equal(s.Keys, []uint64{1, 3}) {
		t.Errorf("snapshot at %d of %v, want 14 and [1 3]", s.Gen, s.Keys)
	}
	// Publish goes on from the mirrored generation.
	if gen, err := w.Publish([]uint64{4}); err != nil || gen != 16 {
		t.Errorf("Publish after PublishAt: %d, %v; want 16", gen, err)
	}
}

func TestZeroKeyRefused(t *testing.T) {
	w := create(t, 8)
	gen, _ := w.Publish([]uint64{7})
	if _, err := w.Publish([]uint64{3, 0, 4}); !errors.Is(err, shm.ErrZeroKey) {
		t.Fatalf("Publish with key 0: err = %v, want ErrZeroKey", err)
	}
	s := snapshot(t, w)
	if s.Gen != gen || !slices.Equal(s.Keys, []uint64{7}) {
		t.Errorf("after refused publish: %+v, want generation %d and [7]", s, gen)
	}
}

func TestOverflow(t *testing.T) {
	const capacity = 16
	w := create(t, capacity)
	r := open(t, w)
	g1, err := w.Publish(seq(1, capacity))
	if err != nil {
		t.Fatalf("a full set: %v", err)
	}
	g2, err := w.Publish(seq(1, capacity+1))
	if !errors.Is(err, shm.ErrOverflow) {
		t.Fatalf("capacity+1 keys: err = %v, want ErrOverflow", err)
	}
	if g2 <= g1 {
		t.Errorf("overflow did not move the generation: %d then %d", g1, g2)
	}
	s := snapshot(t, r)
	if !s.Overflow {
		t.Fatal("snapshot of an overflowed window: Overflow = false")
	}
	for _, k := range []uint64{1, capacity + 1, 999999, ^uint64(0)} {
		if !s.Contains(k) {
			t.Errorf("overflowed snapshot: Contains(%d) = false", k)
		}
	}
	// The same overflowing set again: still an error, but no new generation.
	if g, err := w.Publish(seq(1, capacity+1)); !errors.Is(err, shm.ErrOverflow) || g != g2 {
		t.Errorf("same overflowing set again: gen %d err %v, want %d and ErrOverflow", g, err, g2)
	}
	g3, err := w.Publish([]uint64{4, 5})
	if err != nil {
		t.Fatal(err)
	}
	s = snapshot(t, r)
	if s.Overflow || s.Gen != g3 || !slices.Equal(s.Keys, []uint64{4, 5}) {
		t.Errorf("after a fitting publish: %+v, want {Gen:%d Keys:[4 5] Overflow:false}", s, g3)
	}
	if s.Contains(1) {
		t.Error("Contains(1) after the overflow cleared")
	}
	// The set that filled the window before the overflow must be written
	// again in full, not assumed to be still in the slots.
	if _, err := w.Publish(seq(1, capacity)); err != nil {
		t.Fatal(err)
	}
	if s = snapshot(t, r); !slices.Equal(s.Keys, seq(1, capacity)) {
		t.Errorf("full set after overflow: %v", s.Keys)
	}
}

func TestSnapshotReusesDst(t *testing.T) {
	w := create(t, 0)
	w.Publish(seq(1, 1000))
	buf := make([]uint64, 0, 1000)
	s, err := w.Snapshot(buf)
	if err != nil {
		t.Fatal(err)
	}
	if &s.Keys[:1][0] != &buf[:1][0] {
		t.Error("Snapshot did not reuse dst, which had room")
	}
	allocs := testing.AllocsPerRun(100, func() {
		s, _ = w.Snapshot(s.Keys)
	})
	if allocs != 0 {
		t.Errorf("Snapshot with room in dst: %v allocations, want 0", allocs)
	}
}

func TestReadOnly(t *testing.T) {
	w := create(t, 8)
	r := open(t, w)
	if _, err := r.Publish([]uint64{1}); !errors.Is(err, shm.ErrReadOnly) {
		t.Errorf("Publish on a reader: err = %v, want ErrReadOnly", err)
	}
	if r.Writable() || !w.Writable() {
		t.Errorf("Writable: reader %v, writer %v", r.Writable(), w.Writable())
	}
	m := shm.Mapping(r)
	faulted := func() (faulted bool) {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if e := recover(); e != nil {
				faulted = true
				t.Logf("write through the reader's mapping: %v", e)
			}
		}()
		m[shm.HeaderSize] = 1
		return false
	}()
	if !faulted {
		t.Fatal("a write through a reader's mapping did not fault")
	}
	if s := snapshot(t, r); len(s.Keys) != 0 {
		t.Errorf("window changed by a reader: %v", s.Keys)
	}
}

func TestClose(t *testing.T) {
	w, err := shm.Create(4)
	if err != nil {
		t.Fatal(err)
	}
	r, err := shm.Open(w.File())
	if err != nil {
		t.Fatal(err)
	}
	w.Publish([]uint64{1})
	for _, x := range []*shm.Window{r, w} {
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		if err := x.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if _, err := x.Snapshot(nil); !errors.Is(err, shm.ErrClosed) {
			t.Errorf("Snapshot after Close: %v, want ErrClosed", err)
		}
		if g := x.Gen(); g != 0 {
			t.Errorf("Gen after Close = %d", g)
		}
	}
	if _, err := w.Publish([]uint64{2}); !errors.Is(err, shm.ErrClosed) {
		t.Errorf("Publish after Close: %v, want ErrClosed", err)
	}
}

// header returns the first page of a valid window with the given capacity,
// built from the documented byte offsets.
func header(capacity int) []byte {
	size := shm.HeaderSize + 8*capacity
	page := os.Getpagesize()
	size = (size + page - 1) / page * page
	b := make([]byte, size)
	copy(b[0:], "poolrunW")
	binary.NativeEndian.PutUint64(b[8:], shm.LayoutVersion)
	binary.NativeEndian.PutUint64(b[16:], uint64(capacity))
	return b
}

func TestOpenCorrupt(t *testing.T) {
	tests := []struct {
		name  string
		data  func() []byte
		field string // the error must name it
		want  error  // ErrCorrupt unless set
	}{
		{name: "empty file", data: func() []byte { return nil }, field: "size"},
		{name: "truncated header", data: func() []byte { return header(8)[:100] }, field: "size"},
		{name: "truncated slots", data: func() []byte { return header(1000)[:shm.HeaderSize+8] }, field: "size"},
		{name: "wrong magic", data: func() []byte { b := header(8); copy(b, "notawind"); return b }, field: "magic"},
		{name: "next version", data: func() []byte {
			b := header(8)
			binary.NativeEndian.PutUint64(b[8:], shm.LayoutVersion+1)
			return b
		}, field: "version", want: shm.ErrVersion},
		{name: "version 0", data: func() []byte {
			b := header(8)
			binary.NativeEndian.PutUint64(b[8:], 0)
			return b
		}, field: "version", want: shm.ErrVersion},
		{name: "wrong magic and version", data: func() []byte {
			b := header(8)
			copy(b, "notawind")
			binary.NativeEndian.PutUint64(b[8:], shm.LayoutVersion+1)
			return b
		}, field: "magic"},
		{name: "zero capacity", data: func() []byte { b := header(8); binary.NativeEndian.PutUint64(b[16:], 0); return b }, field: "capacity"},
		{name: "capacity larger than the file", data: func() []byte {
			b := header(8)
			binary.NativeEndian.PutUint64(b[16:], 100000)
			return b
		}, field: "size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "window")
			if err := os.WriteFile(path, tt.data(), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			w, err := shm.Open(f)
			if err == nil {
				w.Close()
				t.Fatal("Open succeeded")
			}
			want, other := shm.ErrCorrupt, shm.ErrVersion
			if tt.want == shm.ErrVersion {
				want, other = other, want
			}
			if !errors.Is(err, want) || errors.Is(err, other) {
				t.Errorf("err = %v, want %v and not %v", err, want, other)
			}
			if !strings.Contains(err.Error(), tt.field) || !strings.Contains(err.Error(), path) {
				t.Errorf("err = %q, want it to name the field %q and the file", err, tt.field)
			}
		})
	}
	t.Run("valid", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "window")
		os.WriteFile(path, header(8), 0o600)
		f, _ := os.Open(path)
		defer f.Close()
		w, err := shm.Open(f)
		if err != nil {
			t.Fatalf("a header built from the documented layout was refused: %v", err)
		}
		defer w.Close()
		if w.Capacity() != 8 {
			t.Errorf("Capacity() = %d, want 8", w.Capacity())
		}
	})
}

func TestWriterStalled(t *testing.T) {
	w := create(t, 8)
	w.Publish([]uint64{1, 2})
	r := open(t, w)
	shm.BreakSeq(w)
	done := make(chan error, 1)
	start := time.Now()
	go func() { _, err := r.Snapshot(nil); done <- err }()
	select {
	case err := <-done:
		elapsed := time.Since(start)
		if !errors.Is(err, shm.ErrWriterStalled) {
			t.Fatalf("err = %v, want ErrWriterStalled", err)
		}
		t.Logf("stall reported after %v: %v", elapsed.Round(time.Millisecond), err)
	case <-time.After(10 * time.Second):
		t.Fatal("Snapshot hung on a stalled writer")
	}
}

// TestTornRead publishes two full sets and sets of varying length
// alternately, as fast as it can, while a reader process snapshots in a loop
// and checks that each snapshot is exactly one published set. The writer
// goes on until the reader says it has seen tornReadGens generations, so
// that reads and writes overlapped however the machine schedules the two.
func TestTornRead(t *testing.T) { tornRead(t, "reader") }

// TestTornAbsent is TestTornRead for [shm.Window.AppendAbsent]: the reader
// process looks keys of several sets up in place, and checks that each
// answer is that of exactly one published set.
func TestTornAbsent(t *testing.T) { tornRead(t, "absent") }

// tornRead publishes for TestTornRead to a reader process in the given
// role.
func tornRead(t *testing.T, role string) {
	w := create(t, 0)
	cmd, stdin, out := child(t, role, w.File())
	expectLine(t, out, "ready")
	seen := make(chan error, 1)
	go func() {
		_, err := out.ReadString('\n')
		seen <- err
	}()

	// Full sets 1 and 2 alternate, with a set of varying length every third
	// publish.
	var sets [][]uint64
	for i := range uint64(3 * 97) {
		if i%3 == 2 {
			sets = append(sets, testSet(3+i%97))
		} else {
			sets = append(sets, testSet(1+i%2))
		}
	}
	const (
		minDuration = 300 * time.Millisecond
		maxDuration = 2 * time.Minute
	)
	start := time.Now()
	published := 0
	var readerDone bool
	for i := 0; ; i++ {
		if _, err := w.Publish(sets[i%len(sets)]); err != nil {
			t.Fatal(err)
		}
		published++
		if i%64 != 0 {
			continue
		}
		if !readerDone {
			select {
			case err := <-seen:
				if err != nil {
					t.Fatalf("%s: %v (it ended before it saw %d generations)", role, err, tornReadGens)
				}
				readerDone = true
			default:
			}
		}
		elapsed := time.Since(start)
		if readerDone && elapsed >= minDuration {
			break
		}
		if elapsed > maxDuration {
			t.Fatalf("the reader saw fewer than %d generations in %v of publishing", tornReadGens, maxDuration)
		}
	}
	elapsed := time.Since(start)
	stdin.Close()
	stats := expectLine(t, out, "")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: %v", role, err)
	}
	t.Logf("%d publishes in %v (%.0f/s); %s: %s", published, elapsed.Round(time.Millisecond), float64(published)/elapsed.Seconds(), role, stats)
}

// TestNoLeftovers kills a process that created a window with SIGKILL and
// checks that no window file remains in the temporary folder or /dev/shm.
func TestNoLeftovers(t *testing.T) {
	for _, role := range []string{"creator", "creator-tempfile"} {
		t.Run(role, func(t *testing.T) {
			before := windowFiles(t)
			cmd, _, out := child(t, role)
			expectLine(t, out, "ready")
			if during := windowFiles(t); !slices.Equal(during, before) {
				t.Errorf("window files on disk while the creator runs: %v (before: %v)", during, before)
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			if after := windowFiles(t); !slices.Equal(after, before) {
				t.Errorf("window files left after SIGKILL: %v (before: %v)", after, before)
			}
		})
	}
}

func windowFiles(t *testing.T) []string {
	var names []string
	for _, dir := range []string{os.TempDir(), "/dev/shm"} {
		entries, err := os.ReadDir(dir)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "poolrun") {
				names = append(names, filepath.Join(dir, e.Name()))
			}
		}
	}
	return names
}

func TestAppendAbsent(t *testing.T) {
	w := create(t, 4)
	r := open(t, w)
	probe := []uint64{1, 2, 3, 4, 5, 6}
	tests := []struct {
		name    string
		publish []uint64
		want    []uint64
	}{
		{"empty", nil, probe},
		{"some", []uint64{2, 4, 6}, []uint64{1, 3, 5}},
		{"all", []uint64{1, 2, 3, 4}, []uint64{5, 6}},
		{"none", []uint64{1, 2, 3, 4, 5, 6}, nil}, // overflowed: keep everything
		{"fits again", []uint64{6}, []uint64{1, 2, 3, 4, 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gen, _ := w.Publish(tc.publish)
			for _, x := range []*shm.Window{w, r} {
				dst := []uint64{99} // appended to
				got, g, err := x.AppendAbsent(dst, probe)
				if err != nil || g != gen || !slices.Equal(got, append([]uint64{99}, tc.want...)) {
					t.Errorf("AppendAbsent = %v, %d, %v; want %v, %d, nil", got, g, err, tc.want, gen)
				}
			}
		})
	}
	dst := make([]uint64, 0, len(probe))
	if n := testing.AllocsPerRun(100, func() { r.AppendAbsent(dst, probe) }); n != 0 {
		t.Errorf("AppendAbsent allocates %v times, want 0", n)
	}
	r.Close()
	if got, _, err := r.AppendAbsent(nil, probe); !errors.Is(err, shm.ErrClosed) || got != nil {
		t.Errorf("AppendAbsent after Close = %v, %v; want nil, ErrClosed", got, err)
	}
}

// TestGenDuringClose reads the generation, which takes no lock, while the
// window is closed under it: it must read the generation or 0, never fault.
func TestGenDuringClose(t *testing.T) {
	for range 50 {
		w := create(t, 8)
		gen, _ := w.Publish([]uint64{1})
		r := open(t, w)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				switch g := r.Gen(); g {
				case gen:
				case 0:
					return
				default:
					t.Errorf("Gen = %d during Close, want %d or 0", g, gen)
					return
				}
			}
		}()
		r.Close()
		<-done
	}
}

// TestReadDuringClose decides and copies, which take no lock, while the
// window is closed under them: each read must give the published set or
// ErrClosed, never the empty set of the pages Close leaves in place.
func TestReadDuringClose(t *testing.T) {
	probe := []uint64{1, 2, 3}
	for i := range 50 {
		w := create(t, 8)
		gen, _ := w.Publish([]uint64{2})
		x := open(t, w)
		if i%2 == 1 {
			x = w // the writer reads too
		}
		started, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			dst := make([]uint64, 0, len(probe))
			deadline := time.Now().Add(10 * time.Second)
			for n := 0; ; n++ {
				if n == 1 {
					close(started)
				}
				absent, g, err := x.AppendAbsent(dst, probe)
				s, serr := x.Snapshot(nil)
				if errors.Is(err, shm.ErrClosed) && errors.Is(serr, shm.ErrClosed) {
					return
				}
				if !errors.Is(err, shm.ErrClosed) && (err != nil || g != gen || !slices.Equal(absent, []uint64{1, 3})) {
					t.Errorf("AppendAbsent during Close = %v, %d, %v; want [1 3], %d, nil or ErrClosed", absent, g, err, gen)
					return
				}
				if !errors.Is(serr, shm.ErrClosed) && (serr != nil || s.Gen != gen || !slices.Equal(s.Keys, []uint64{2})) {
					t.Errorf("Snapshot during Close = %+v, %v; want [2] at %d, or ErrClosed", s, serr, gen)
					return
				}
				if time.Now().After(deadline) {
					t.Error("reads still succeed 10s after Close began")
					return
				}
			}
		}()
		<-started
		x.Close()
		<-done
	}
}
