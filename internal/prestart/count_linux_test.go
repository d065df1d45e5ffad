package prestart

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCountJobs: the "run:" of a regular file are counted; a missing file,
// a folder and a FIFO count 0.
func TestCountJobs(t *testing.T) {
	dir := t.TempDir()
	wf := filepath.Join(dir, "wf.yaml")
	if err := os.WriteFile(wf, []byte("jobs:\n"+strings.Repeat("  - {id: a, run: \"true\"}\n", 7)), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "wf.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
	for path, want := range map[string]int{wf: 7, filepath.Join(dir, "none.yaml"): 0, dir: 0, fifo: 0} {
		if got := countJobs(path); got != want {
			t.Errorf("countJobs(%s) = %d, want %d", filepath.Base(path), got, want)
		}
	}
}

// TestCountJobsLeavesFIFOAlone: countJobs never opens a FIFO, not even for
// a moment. A writer waiting for a reader would get in and write to
// nobody once countJobs closed it (poolrun run then refuses the FIFO). A
// writer here tries to open the FIFO, without waiting, for as long as
// countJobs is called again and again: it must never find a reader.
func TestCountJobsLeavesFIFOAlone(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "wf.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
	stop := make(chan struct{})
	opened := make(chan int, 1)
	go func() {
		tries := 0
		for {
			select {
			case <-stop:
				opened <- 0
				return
			default:
			}
			tries++
			fd, err := syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK, 0)
			if err == nil {
				syscall.Close(fd)
				opened <- tries
				return
			}
			if !errors.Is(err, syscall.ENXIO) {
				t.Errorf("opening the FIFO to write: %v", err)
			}
		}
	}()
	for range 5000 {
		countJobs(fifo)
	}
	close(stop)
	if n := <-opened; n > 0 {
		t.Fatalf("a writer found the FIFO open for reading (at its try %d): countJobs opened it", n)
	}
}
