package bench

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkForkWait measures what a Go process pays to run commands two
// at a time, against make -j2, to find where poolrun run's lead is lost
// (group 8 of README.md): one op is sizes.forkWaitJobs jobs of `true`,
// two at a time, run by make -j2 and by two processes of this binary (role forkwait),
// each with two goroutines that start `true` and wait for it: "wait" as
// os/exec does (a blocking waitid, which holds a thread), "poll" in the
// runtime's network poller on a pidfd of the child, which holds none. The
// three go one after the other, in an order that turns with every op.
// It reports each one's CPU time per job (its process and its children,
// as wait4 gives it) and the Go ones' over make's. Skipped where make or
// pidfds are missing.
func BenchmarkForkWait(b *testing.B) {
	makePath, err := exec.LookPath("make")
	if err != nil {
		b.Skip("make is not installed")
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("true is not installed")
	}
	dir := b.TempDir()
	var mk strings.Builder
	jobs := sizes.forkWaitJobs
	targets := make([]string, jobs)
	for i := range targets {
		targets[i] = fmt.Sprintf("j%d", i)
	}
	fmt.Fprintf(&mk, ".PHONY: all %s\nall: %[1]s\n", strings.Join(targets, " "))
	for _, t := range targets {
		fmt.Fprintf(&mk, "%s:\n\t@%s\n", t, truePath)
	}
	if err := os.WriteFile(dir+"/Makefile", []byte(mk.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	tools := []struct {
		name string
		cmd  func() *exec.Cmd
	}{
		{"make", func() *exec.Cmd { return exec.Command(makePath, "-s", "-j2") }},
		{"wait", func() *exec.Cmd { return forkWaitRole("forkwait-wait", truePath, jobs) }},
		{"poll", func() *exec.Cmd { return forkWaitRole("forkwait-poll", truePath, jobs) }},
	}
	var cpu [3]time.Duration
	b.ResetTimer()
	for i := range b.N {
		for k := range tools {
			k = (k + i) % len(tools)
			cmd := tools[k].cmd()
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				if cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == 3 {
					b.Skip(strings.TrimSpace(string(out)))
				}
				b.Fatalf("%s: %v\n%s", tools[k].name, err, out)
			}
			ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			cpu[k] += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	b.StopTimer()
	perJob := func(d time.Duration) float64 { return d.Seconds() * 1e3 / float64(b.N*jobs) }
	b.ReportMetric(perJob(cpu[0]), "make-cpu-ms/job")
	b.ReportMetric(perJob(cpu[1]), "wait-cpu-ms/job")
	b.ReportMetric(perJob(cpu[2]), "poll-cpu-ms/job")
	b.ReportMetric(cpu[1].Seconds()/cpu[0].Seconds(), "wait/make")
	b.ReportMetric(cpu[2].Seconds()/cpu[0].Seconds(), "poll/make")
}

func forkWaitRole(role, truePath string, jobs int) *exec.Cmd {
	c := exec.Command(os.Args[0], truePath, strconv.Itoa(jobs))
	c.Env = append(os.Environ(), envRole+"="+role)
	return c
}

// roleForkWait is the test binary as one of BenchmarkForkWait's Go
// processes: it runs the command os.Args[1] os.Args[2] times, two at a
// time, waiting as role says. Status 3: no pidfd here.
func roleForkWait(role string) int {
	path := os.Args[1]
	jobs, err := strconv.Atoi(os.Args[2])
	if err != nil {
		fmt.Println(err)
		return 1
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Go(func() {
			for range jobs / 2 {
				var err error
				if role == "forkwait-poll" {
					err = runPolled(path)
				} else {
					err = exec.Command(path).Run()
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	err, failed := <-errs // the first, if any
	switch {
	case !failed:
		return 0
	case err == errNoPidfd:
		fmt.Println(err)
		return 3
	}
	fmt.Println(err)
	return 1
}

var errNoPidfd = fmt.Errorf("bench: no pidfd on this system")

// runPolled runs path and waits for its end in the network poller, on a
// pidfd, before os/exec reaps it.
func runPolled(path string) error {
	pidfd := -1
	cmd := exec.Command(path)
	cmd.SysProcAttr = &syscall.SysProcAttr{PidFD: &pidfd}
	if err := cmd.Start(); err != nil {
		return err
	}
	if pidfd < 0 {
		cmd.Wait()
		return errNoPidfd
	}
	if err := syscall.SetNonblock(pidfd, true); err != nil {
		syscall.Close(pidfd)
		return err
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	rc, err := f.SyscallConn()
	if err == nil {
		err = rc.Read(func(fd uintptr) bool {
			var info unix.Siginfo
			werr := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
			return werr != nil || info.Signo != 0
		})
	}
	f.Close()
	if werr := cmd.Wait(); err == nil {
		err = werr
	}
	return err
}
