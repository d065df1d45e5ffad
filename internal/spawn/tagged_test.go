package spawn_test

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/proctest"
	"github.com/poolrun/poolrun/internal/spawn"
)

// TestSignalTagged starts a shell whose environment carries a tag; the
// shell starts a grandchild in a process group of its own, and exits. The
// grandchild, orphaned and in another group, is found by its tag and
// killed; a process with another tag is left alone.
func TestSignalTagged(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("environments are read from /proc")
	}
	tag := fmt.Sprintf("POOLRUN_TEST_TAG=%d-%d", os.Getpid(), time.Now().UnixNano())
	start := func(tag string) int {
		t.Helper()
		cmd := exec.Command("sh", "-c", "setsid sleep 30 </dev/null >/dev/null 2>&1 & echo $!")
		cmd.Env = append(os.Environ(), tag)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	victim, other := start(tag), start(tag+"-other")
	defer syscall.Kill(other, syscall.SIGKILL)
	time.Sleep(50 * time.Millisecond) // setsid has run, and exec'd sleep
	if pg, _ := syscall.Getpgid(victim); pg == syscall.Getpgrp() {
		t.Fatalf("grandchild %d is in this process's group, want another", victim)
	}
	if n := spawn.SignalTagged(func(e string) bool { return e == tag }, syscall.SIGKILL); n != 1 {
		t.Fatalf("signalled %d processes tagged %s", n, tag)
	}
	deadline := time.Now().Add(10 * time.Second)
	for proctest.Alive(victim) {
		if time.Now().After(deadline) {
			t.Fatalf("tagged grandchild %d still runs", victim)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !proctest.Alive(other) {
		t.Errorf("a process with another tag was killed")
	}
}
