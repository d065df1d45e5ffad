package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
)

// echoLen returns the length of its argument and a value of n bytes.
var echoLen = engine.Register("cluster_test.echoLen", func(ctx context.Context, a sized) (sized, error) {
	return sized{Len: len(a.Data), Data: make([]byte, a.Want)}, nil
})

type sized struct {
	Data      []byte
	Len, Want int
}

// TestValueLimitsRemote: an argument and a result of the pool's limit
// (64 MiB by default) cross to and from a remote worker; an argument or a
// result over it fails that job alone, with an error that names the limit
// (ErrTooLarge, for the argument, which the pool checks), and the pool
// goes on. (Not under the race detector, whose shadow memory makes 64 MiB
// values take minutes; .ci/run runs it without.)
func TestValueLimitsRemote(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("64 MiB values: slow under -race and -short")
	}
	joinFile := filepath.Join(t.TempDir(), "run.join")
	l, err := listen("", joinFile)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	startWorkers(t, joinFile, 1)
	// The remote worker alone.
	p := engine.New(engine.RemoteOnly(time.Minute), l.Option())
	// The encoding of sized takes some bytes besides Data: leave it 1 KiB.
	const most = engine.DefaultMaxValueSize - 1<<10
	big := engine.Queue(p, echoLen, sized{Data: make([]byte, most), Want: most})
	overArg := engine.Queue(p, echoLen, sized{Data: make([]byte, engine.DefaultMaxValueSize+1)})
	over := engine.Queue(p, echoLen, sized{Want: engine.DefaultMaxValueSize + 1})
	after := engine.Queue(p, echoLen, sized{Data: []byte("abc"), Want: 1})
	err = p.Run(context.Background())
	if !errors.Is(err, engine.ErrTooLarge) {
		t.Errorf("Run: %v, want the error of the job whose result is too large", err)
	}
	if v, err := big.Result(); err != nil || v.Len != most || len(v.Data) != most {
		t.Errorf("the job of a %d-byte argument and result: argument %d bytes, result %d bytes, %v", most, v.Len, len(v.Data), err)
	}
	if _, err := overArg.Result(); !errors.Is(err, engine.ErrTooLarge) {
		t.Errorf("the job whose argument is over the limit: %v, want ErrTooLarge", err)
	}
	limit := fmt.Sprintf("the limit is %d", engine.DefaultMaxValueSize)
	if _, err := over.Result(); over.Status() != engine.Failed || err == nil || !strings.Contains(err.Error(), limit) {
		t.Errorf("the job whose result is over the limit: %v, %v; want Failed, naming the limit", over.Status(), err)
	} else {
		t.Logf("over the limit: %v", err)
	}
	if v, err := after.Result(); err != nil || v.Len != 3 {
		t.Errorf("the job after it: %+v, %v", v, err)
	}
}

// echoPattern returns its argument, which must be patterned (see
// pattern): a byte out of place fails the job, with its offset.
var echoPattern = engine.Register("cluster_test.echoPattern", func(ctx context.Context, a []byte) ([]byte, error) {
	if i := unpatterned(a); i >= 0 {
		return nil, fmt.Errorf("byte %d of %d is %d, want %d", i, len(a), a[i], byte(i%251))
	}
	return a, nil
})

// pattern returns n bytes that repeat every 251: a message misplaced in
// the stream (1 MiB) shows.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

// unpatterned returns the offset of the first byte of b that is not
// pattern's, or -1.
func unpatterned(b []byte) int {
	for i, c := range b {
		if c != byte(i%251) {
			return i
		}
	}
	return -1
}

// envLargeMiB sets the size of TestLargeValueRemote's value, in MiB (128
// unless set: over the 64 MiB a NATS server holds for a slow client by
// default; POOLRUN_TEST_LARGE_MIB=512 for the figures of the docs).
const envLargeMiB = "POOLRUN_TEST_LARGE_MIB"

// TestLargeValueRemote: with MaxValueSize raised near its limit, an
// argument and a result of 128 MiB (or envLargeMiB) cross to and from a remote worker
// whole: the streams hold a window of them at a time, and the server no
// longer drops a worker that reads the argument slower than the pool
// writes it. It logs the pool's peak resident memory (this process's,
// with the NATS server) over what it held before: while queueing (the
// value and its encoding) and while running (the frames both ways, the
// result, and the garbage the collector has not yet taken).
func TestLargeValueRemote(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("values of 128 MiB or more: slow under -race and -short")
	}
	size := 128 << 20
	if n, err := strconv.Atoi(os.Getenv(envLargeMiB)); err == nil && n > 0 {
		size = n << 20 // for figures at other sizes
	}
	joinFile := filepath.Join(t.TempDir(), "run.join")
	l, err := listen("", joinFile)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	startWorkers(t, joinFile, 1)
	p := engine.New(engine.RemoteOnly(time.Minute), engine.MaxValueSize(1023<<20), l.Option())
	var mem peakMemory
	mem.reset()
	job := engine.Queue(p, echoPattern, pattern(size))
	queued, _ := mem.peak()
	mem.reset()
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	ran, merr := mem.peak()
	v, err := job.Result()
	if err != nil {
		t.Fatalf("the job of a %d-byte argument and result: %v", size, err)
	}
	if i := unpatterned(v); len(v) != size || i >= 0 {
		t.Fatalf("the result: %d bytes, the first out of place at %d; want %d patterned", len(v), i, size)
	}
	if merr != nil {
		t.Logf("the pool's peak memory is not known: %v", merr)
		return
	}
	t.Logf("the pool's peak memory over what it held before: %d MiB queueing, %d MiB running (%.1f times the value of %d MiB)",
		queued>>20, ran>>20, float64(ran)/float64(size), size>>20)
}

// peakMemory measures the peak resident memory of this process (VmHWM)
// over a baseline, where Linux can reset the peak (/proc/self/clear_refs);
// err says why not.
type peakMemory struct {
	base int64
	err  error
}

// reset collects the garbage, returns it to the system, and starts the
// peak from what this process holds now.
func (m *peakMemory) reset() {
	debug.FreeOSMemory()
	if m.err = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); m.err == nil {
		m.base, m.err = procStatus("VmRSS")
	}
}

// peak returns the peak resident memory since reset, over what the
// process held then.
func (m *peakMemory) peak() (int64, error) {
	if m.err != nil {
		return 0, m.err
	}
	hwm, err := procStatus("VmHWM")
	return hwm - m.base, err
}

// procStatus returns the field of /proc/self/status (in kB there), in
// bytes.
func procStatus(field string) (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s in /proc/self/status: %q", field, rest)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}
