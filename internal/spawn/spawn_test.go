package spawn_test

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolrun/poolrun/internal/spawn"
)

// TestChildDiesWithParent starts, through a helper process (this test
// binary), a child that asks for SIGKILL on its parent's death; the helper
// starts it from a goroutine that then ends (so the runtime may retire that
// goroutine's thread), and exits. The child must be gone with the helper,
// not when some thread ends earlier, and not outlive it.
func TestChildDiesWithParent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("parent-death signals are Linux's")
	}
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	helper.Env = append(os.Environ(), "SPAWN_HELPER=1")
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("helper printed %q", buf[:n])
	}
	// The child lives while the helper does (the helper waits 300 ms after
	// the starting goroutine ended).
	if syscall.Kill(pid, 0) != nil {
		t.Fatalf("child %d gone while its parent lives", pid)
	}
	if err := helper.Wait(); err != nil {
		t.Fatalf("helper: %v (status 3: the child died with the thread that started it)", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("child %d outlived its parent by 5 s", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestHelperProcess(t *testing.T) {
	if os.Getenv("SPAWN_HELPER") != "1" {
		t.Skip("helper")
	}
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // ends with the goroutine: its thread exits
		done <- spawn.Start(cmd)
	}()
	if err := <-done; err != nil {
		os.Exit(1)
	}
	os.Stdout.WriteString(strconv.Itoa(cmd.Process.Pid) + "\n")
	time.Sleep(300 * time.Millisecond)
	if syscall.Kill(cmd.Process.Pid, 0) != nil {
		os.Exit(3) // the child died with a thread
	}
	os.Exit(0)
}
