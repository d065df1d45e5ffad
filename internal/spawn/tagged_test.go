package spawn_test

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
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
	// setsid has run once the grandchild is sleep: it makes the new
	// session, then executes sleep.
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(proctest.Cmdline(victim), []string{"sleep", "30"}) {
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d runs %q, not sleep 30", victim, proctest.Cmdline(victim))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if pg, _ := syscall.Getpgid(victim); pg == syscall.Getpgrp() {
		t.Fatalf("grandchild %d is in this process's group, want another", victim)
	}
	if n := spawn.SignalTagged(func(e string) bool { return e == tag }, syscall.SIGKILL); n != 1 {
		t.Fatalf("signalled %d processes tagged %s", n, tag)
	}
	deadline = time.Now().Add(10 * time.Second)
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

// TestSignalTaggedOtherUser: a process of another user that carries the
// tag is not signalled, even by root, which can read its environment; a
// process of this user with the same tag is. Whether the other user's
// process was signalled is told by how it ends: by the SIGTERM the test
// sends it afterwards, not by a SIGKILL sent before.
func TestSignalTaggedOtherUser(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("environments are read from /proc")
	}
	if os.Getuid() != 0 {
		t.Skip("starting a process of another user takes root")
	}
	tag := fmt.Sprintf("POOLRUN_TEST_TAG=%d-%d", os.Getpid(), time.Now().UnixNano())
	start := func(attr *syscall.SysProcAttr) *exec.Cmd {
		t.Helper()
		cmd := exec.Command("sleep", "30")
		cmd.Env = append(os.Environ(), tag)
		cmd.SysProcAttr = attr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	nobody := start(&syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}})
	mine := start(nil)
	if n := spawn.SignalTagged(func(e string) bool { return e == tag }, syscall.SIGKILL); n != 1 {
		t.Errorf("signalled %d processes tagged %s, want 1: this user's", n, tag)
	}
	nobody.Process.Signal(syscall.SIGTERM)
	for _, c := range []struct {
		who  string
		cmd  *exec.Cmd
		want syscall.Signal
	}{{"uid 65534's process", nobody, syscall.SIGTERM}, {"this user's process", mine, syscall.SIGKILL}} {
		c.cmd.Wait()
		if ws := c.cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != c.want {
			t.Errorf("%s ended %v, want killed by %v", c.who, c.cmd.ProcessState, c.want)
		}
	}
}

// TestStartTime: a process's start time is the one /proc/PID/stat gives
// (field 22, after a command name with spaces and parentheses), and a
// process started later has a later one, or the same one within a tick.
func TestStartTime(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("start times are read from /proc")
	}
	self, err := spawn.StartTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// A name that a naive parse of the stat line splits wrongly.
	dir := t.TempDir()
	odd := dir + "/a) b ("
	if err := os.Symlink("/bin/sleep", odd); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(odd, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "(a) b ()") {
		t.Fatalf("the child's stat line %q does not hold the odd name: the test proves nothing", data)
	}
	after := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	want, _ := strconv.ParseUint(after[19], 10, 64)
	child, err := spawn.StartTime(cmd.Process.Pid)
	if err != nil || child != want {
		t.Errorf("StartTime of the child: %d, %v; its stat line says %d", child, err, want)
	}
	if child < self {
		t.Errorf("the child started at %d, before this process (%d)", child, self)
	}
	if _, err := spawn.StartTime(-1); err == nil {
		t.Error("StartTime(-1): no error")
	}
}

// TestKillTaggedStopped: a tagged shell in a process group of its own,
// stopped (SIGSTOP) with the busy loops it started in the background,
// which ignore SIGHUP as poolrun's commands do: killed with KillTagged,
// none of the loops runs again. Killed in the order of /proc, the shell
// would die first, the kernel would continue its orphaned group
// (SIGHUP, SIGCONT), and a loop would write before its own SIGKILL.
func TestKillTaggedStopped(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("environments are read from /proc")
	}
	dir := t.TempDir()
	tag := fmt.Sprintf("POOLRUN_TEST_TAG=%d-%d", os.Getpid(), time.Now().UnixNano())
	const loops = 8
	cmd := exec.Command("sh", "-c", `trap '' HUP; i=0; while [ $i -lt `+strconv.Itoa(loops)+` ]; do (while :; do echo t >> ticks; done) & i=$((i+1)); done; wait`)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), tag)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL); cmd.Wait() })
	mine := func(e string) bool { return e == tag }
	members := func() []int {
		return proctest.Find("environ", func(env []byte) bool { return slices.Contains(strings.Split(string(env), "\x00"), tag) })
	}
	running := func() bool {
		_, err := os.Stat(dir + "/ticks")
		return err == nil && len(members()) == loops+1
	}
	deadline := time.Now().Add(20 * time.Second)
	for !running() {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the shell and its %d loops run after 20 s", len(members()), loops)
		}
		time.Sleep(10 * time.Millisecond)
	}
	syscall.Kill(-pgid, syscall.SIGSTOP)
	procs := members()
	for _, pid := range procs {
		for proctest.State(pid) != "T" {
			if time.Now().After(deadline) {
				t.Fatalf("process %d is in state %s after SIGSTOP of its group", pid, proctest.State(pid))
			}
			time.Sleep(time.Millisecond)
		}
	}
	before, err := os.ReadFile(dir + "/ticks")
	if err != nil {
		t.Fatal(err)
	}
	if n := spawn.KillTagged(mine); n != len(procs) {
		t.Errorf("killed %d processes, want the %d tagged", n, len(procs))
	}
	cmd.Wait()
	if left := proctest.WaitGone(procs, 10*time.Second); len(left) > 0 {
		t.Fatalf("processes %v still there after KillTagged", left)
	}
	after, err := os.ReadFile(dir + "/ticks")
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("the stopped loops wrote %d bytes after KillTagged: they ran again before they died", len(after)-len(before))
	}
}
