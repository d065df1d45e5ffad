package proctest_test

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"syscall"
	"testing"

	"github.com/poolrun/poolrun/internal/proctest"
)

func skipOff(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
}

// TestSelf: this process's state, command line and environment are read
// as the runtime knows them.
func TestSelf(t *testing.T) {
	skipOff(t)
	pid := os.Getpid()
	if st := proctest.State(pid); st != "R" && st != "S" {
		t.Errorf("State(self) = %q, want R or S", st)
	}
	if !proctest.Alive(pid) {
		t.Error("Alive(self) = false")
	}
	if got := proctest.Cmdline(pid); !slices.Equal(got, os.Args) {
		t.Errorf("Cmdline(self) = %q, want %q", got, os.Args)
	}
	// /proc/PID/environ is the environment the process started with.
	if env := proctest.Environ(pid); len(env) == 0 || !slices.Contains(env, "PATH="+os.Getenv("PATH")) {
		t.Errorf("Environ(self) has no PATH=%s: %q", os.Getenv("PATH"), env)
	}
	if proctest.State(-1) != "" || proctest.Cmdline(-1) != nil || proctest.Environ(-1) != nil {
		t.Error("a process that does not exist has a state, arguments or an environment")
	}
}

// TestChild: a child is among this process's children, stopped is T, and
// once reaped it is gone.
func TestChild(t *testing.T) {
	skipOff(t)
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	if !slices.Contains(proctest.Children(os.Getpid()), pid) {
		t.Errorf("Children(self) = %v, want %d among them", proctest.Children(os.Getpid()), pid)
	}
	syscall.Kill(pid, syscall.SIGSTOP)
	if got := proctest.WaitGone([]int{pid}, 0); !slices.Equal(got, []int{pid}) {
		t.Errorf("WaitGone of a live process = %v, want it", got)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, syscall.WUNTRACED, nil); err != nil || !ws.Stopped() {
		t.Fatalf("wait for the child to stop: %v, %v", ws, err)
	}
	if st := proctest.State(pid); st != "T" {
		t.Errorf("State of a stopped child = %q, want T", st)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if left := proctest.WaitGone([]int{pid}, 0); len(left) != 0 {
		t.Errorf("WaitGone of a reaped child = %v", left)
	}
}

// TestFDs: a file opened close-on-exec (as os.Open does) is among the
// descriptors, but not among the inherited ones; its duplicate without
// close-on-exec is among both.
func TestFDs(t *testing.T) {
	skipOff(t)
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	dup, err := syscall.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(dup)
	all, err := proctest.FDs()
	if err != nil {
		t.Fatal(err)
	}
	if all[fd] != os.DevNull || all[dup] != os.DevNull {
		t.Errorf("FDs()[%d], [%d] = %q, %q; want %s", fd, dup, all[fd], all[dup], os.DevNull)
	}
	inherited, err := proctest.InheritedFDs()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := inherited[fd]; ok {
		t.Errorf("InheritedFDs() has %d, which is close-on-exec", fd)
	}
	if inherited[dup] != os.DevNull {
		t.Errorf("InheritedFDs()[%d] = %q, want %s", dup, inherited[dup], os.DevNull)
	}
	for fd := range inherited {
		if fd <= 2 {
			t.Errorf("InheritedFDs() has standard descriptor %d", fd)
		}
	}
}
