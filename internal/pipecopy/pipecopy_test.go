package pipecopy_test

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/pipecopy"
)

// sink gathers what a Copy gives it, slowly if asked to.
type sink struct {
	mu    sync.Mutex
	b     bytes.Buffer
	delay time.Duration
	lasts int
	late  int // calls of each after last
}

func (s *sink) each(p []byte) {
	time.Sleep(s.delay)
	s.mu.Lock()
	s.b.Write(p)
	if s.lasts > 0 {
		s.late++
	}
	s.mu.Unlock()
}

func (s *sink) last() {
	s.mu.Lock()
	s.lasts++
	s.mu.Unlock()
}

func (s *sink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// TestCopyToTheEnd: a pipe that ends is copied whole, and last is called
// once, after.
func TestCopyToTheEnd(t *testing.T) {
	r, w := pipe(t)
	var s sink
	c := pipecopy.Start(r, s.each, s.last)
	want := strings.Repeat("0123456789", 100000) // 1 MB, more than the pipe holds
	go func() {
		w.WriteString(want)
		w.Close()
	}()
	c.End(time.Now().Add(time.Minute))
	if got := s.String(); got != want {
		t.Errorf("copied %d bytes, want %d", len(got), len(want))
	}
	if s.lasts != 1 {
		t.Errorf("last called %d times", s.lasts)
	}
	select {
	case <-c.Done():
	default:
		t.Error("Done is not closed after End")
	}
}

// TestEndCopiesWhatThePipeHolds: the pipe stays open (a process left
// behind holds it), and the copy lags behind (its function is slow): End
// returns soon after its deadline, having copied all that was written
// before, and not lost what the pipe held then.
func TestEndCopiesWhatThePipeHolds(t *testing.T) {
	r, w := pipe(t)
	want := strings.Repeat("x", 60<<10) // fits in a pipe
	if _, err := w.WriteString(want); err != nil {
		t.Fatal(err)
	}
	s := sink{delay: 20 * time.Millisecond}
	c := pipecopy.Start(r, s.each, s.last)
	start := time.Now()
	c.End(start.Add(10 * time.Millisecond))
	took := time.Since(start)
	if got := s.String(); got != want {
		t.Errorf("copied %d bytes, want %d", len(got), len(want))
	}
	if took > 10*time.Second || s.lasts != 1 {
		t.Errorf("End took %v, last called %d times", took, s.lasts)
	}
	t.Logf("End returned after %v", took.Round(time.Millisecond))
}

// TestEndBoundsTheDrain: a writer that never stops does not keep End
// from returning: it copies at most MaxDrain bytes past its deadline.
func TestEndBoundsTheDrain(t *testing.T) {
	r, w := pipe(t)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		b := bytes.Repeat([]byte("y"), 4096)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := w.Write(b); err != nil {
				return
			}
		}
	}()
	var s sink
	c := pipecopy.Start(r, s.each, s.last)
	// End comes while the copy is under way: it has copied something.
	deadline := time.Now().Add(10 * time.Second)
	for len(s.String()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("nothing copied 10 s after the start")
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	c.End(start)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("End took %v", took)
	}
	// The copy has ended when End returns (Done is closed, last called
	// once): it calls each no more, however long the writer goes on.
	select {
	case <-c.Done():
	default:
		t.Error("Done is not closed after End: the copy goes on")
	}
	n := len(s.String())
	if s.lasts != 1 || s.late != 0 {
		t.Errorf("last called %d times, each called %d times after it", s.lasts, s.late)
	}
	t.Logf("copied %d bytes", n)
}
