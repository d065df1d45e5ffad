package execflow

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// TestSweeper: a sweeper kills the processes that bear the owner of an
// ended command, and no other: the first command's in end itself; a
// second's, ended less than sweepEvery later, in a look that end
// schedules for later; a third's, ended while a look is scheduled, in
// flush. A process of a command that has not ended lives on.
func TestSweeper(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("marks are found in /proc")
	}
	base := fmt.Sprintf("%d.%d:%d.%d", os.Getpid(), time.Now().UnixNano(), os.Getpid(), time.Now().UnixNano()) // no process's tags
	start := func(n int) (own string, exited <-chan struct{}) {
		t.Helper()
		own = base + ":" + strconv.Itoa(n)
		cmd := exec.Command("sleep", "30")
		cmd.Env = append(os.Environ(), OwnerEnv+"="+own)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-done })
		return own, done
	}
	ends := func(what string, exited <-chan struct{}) {
		t.Helper()
		select {
		case <-exited:
		case <-time.After(sweepEvery + 30*time.Second):
			t.Fatalf("%s lives on", what)
		}
	}
	first, firstExited := start(1)
	second, secondExited := start(2)
	third, thirdExited := start(3)
	_, otherExited := start(4)

	var s sweeper
	s.end(first)
	ends("the first command's process", firstExited)

	s.end(second)
	s.mu.Lock()
	scheduled, early := s.timer != nil, time.Since(s.last) < sweepEvery/2
	s.mu.Unlock()
	if !scheduled {
		t.Fatal("the second command's end, right after the first's, scheduled no look")
	}
	select {
	case <-secondExited:
		if early {
			t.Error("the second command's process was killed at once, less than sweepEvery after the first look")
		}
	default:
	}
	ends("the second command's process", secondExited)

	s.end(third)
	s.flush()
	select {
	case <-thirdExited:
	case <-time.After(30 * time.Second):
		t.Fatal("the third command's process lives on after flush")
	}
	s.mu.Lock()
	if s.timer != nil || len(s.ended) > 0 {
		t.Errorf("after flush, a look is scheduled (%v) for %v", s.timer != nil, s.ended)
	}
	s.mu.Unlock()

	select {
	case <-otherExited:
		t.Error("the process of a command that has not ended was killed")
	default:
	}
}
