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

// TestSignalSession starts a shell in a session of its own, which starts a
// grandchild and exits; the grandchild, orphaned, is still found through
// the session and killed.
func TestSignalSession(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("sessions are listed from /proc")
	}
	cmd := exec.Command("sh", "-c", "sleep 30 </dev/null >/dev/null 2>&1 & echo $!")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	sid := cmd.Process.Pid
	if syscall.Kill(pid, 0) != nil {
		t.Fatalf("grandchild %d is not running", pid)
	}
	if n := spawn.SignalSession(sid, syscall.SIGKILL); n != 1 {
		t.Fatalf("signalled %d processes of session %d, want 1", n, sid)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The orphan is reaped by init; until then it is a zombie.
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(b), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d still runs", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := spawn.SignalSession(sid, syscall.SIGKILL); n != 0 {
		t.Fatalf("signalled %d processes of an empty session", n)
	}
}
