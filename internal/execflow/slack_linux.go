//go:build linux

package execflow

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// slackEnv holds, in a poolrun that raised its timer slack (see
// CoalesceWakeups), the slack it was started with, in nanoseconds: its
// commands get that one back. Commands never see it (EnvPrefix).
const slackEnv = EnvPrefix + "TIMER_SLACK"

// batchEnv marks a poolrun that moved itself from the SCHED_OTHER
// scheduling policy to SCHED_BATCH when it raised its timer slack (see
// CoalesceWakeups): its commands get SCHED_OTHER back. Commands never see
// it (EnvPrefix).
const batchEnv = EnvPrefix + "SCHED_BATCH"

// Scheduling policies (linux/sched.h).
const (
	schedOther = 0
	schedBatch = 3
)

// setSched sets the scheduling policy of the calling thread to policy,
// at priority 0.
func setSched(policy int) error {
	var prio int32 // struct sched_param
	_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, 0, uintptr(policy), uintptr(unsafe.Pointer(&prio)))
	if errno != 0 {
		return errno
	}
	return nil
}

// getSched returns the scheduling policy of the calling thread.
func getSched() (int, error) {
	policy, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETSCHEDULER, 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(policy), nil
}

// CoalesceWakeups re-executes this program in place, with the same
// arguments and environment, its timer slack raised to [TimerSlack], and
// returns only if it did not: elsewhere than on Linux, when this process
// is the re-executed one already, or when the exec failed (then nothing
// changed). Call it before anything of a run has happened: the program
// starts again from main.
//
// Why: while any of its goroutines runs, the Go runtime's monitor thread
// (sysmon) wakes every 20 µs, and it counts a goroutine that forks a
// command as running until the command has called exec. In a pool that
// starts many short commands, those wakeups took a tenth of the process's
// CPU, and, each a context switch on a CPU the commands want, slowed the
// commands too (bench/README.md, group 8; golang/go#18236 asks for the
// tick to be tunable). The timer slack lets the kernel delay a thread's
// timed sleeps by that much, to wake it with other timers: sysmon then
// wakes about once per TimerSlack. It is set on the first thread, whose
// slack every thread of the new program inherits, sysmon among them,
// which starts before main. A command gets the slack this process was
// started with (see forkExec).
//
// The new program also runs as SCHED_BATCH, if this one ran as
// SCHED_OTHER (the default): a thread of it that wakes does not preempt
// a command that runs, but waits for the end of the command's time slice
// or for a free CPU. Its threads wake for bookkeeping (a command ended, a
// line to copy), and each preemption cost a command two context switches.
// On 1,000 jobs of true, in 30 rounds in turn with make -j2, it took poolrun
// from 0.985 to 0.942 × make's wall time and from 0.955 to 0.900 × its CPU
// (bench/README.md, group 8). A command gets SCHED_OTHER back (see forkExec); a poolrun
// started with another policy (chrt) keeps it, and so do its commands.
func CoalesceWakeups() {
	if _, done := os.LookupEnv(slackEnv); done {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	runtime.LockOSThread() // the exec is this thread's, with its slack
	defer runtime.UnlockOSThread()
	before, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		return
	}
	if unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(TimerSlack.Nanoseconds()), 0, 0, 0) != nil {
		return
	}
	env := append(os.Environ(), slackEnv+"="+strconv.Itoa(before))
	batch := false
	if policy, err := getSched(); err == nil && policy == schedOther && setSched(schedBatch) == nil {
		batch = true
		env = append(env, batchEnv+"=1")
	}
	syscall.Exec(exe, os.Args, env) // returns only when it failed
	unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(before), 0, 0, 0)
	if batch {
		setSched(schedOther)
	}
}

// commandSlack is the timer slack that commands get: the one poolrun was
// started with, in nanoseconds, or 0 when it did not raise its own.
var commandSlack = sync.OnceValue(func() int {
	n, err := strconv.Atoi(os.Getenv(slackEnv))
	if err != nil || n <= 0 {
		return 0
	}
	return n
})

// commandBatch reports whether poolrun moved itself to SCHED_BATCH: its
// commands then get SCHED_OTHER back.
var commandBatch = sync.OnceValue(func() bool {
	_, ok := os.LookupEnv(batchEnv)
	return ok
})

// forkExec is syscall.ForkExec, from a thread whose timer slack and
// scheduling policy are, for the fork, those poolrun was started with: a
// command inherits both from the thread that forks it.
func forkExec(path string, argv []string, attr *syscall.ProcAttr) (int, error) {
	slack, batch := commandSlack(), commandBatch()
	if slack == 0 && !batch {
		return syscall.ForkExec(path, argv, attr)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if slack != 0 {
		unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(slack), 0, 0, 0)
		defer unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(TimerSlack.Nanoseconds()), 0, 0, 0)
	}
	if batch && setSched(schedOther) == nil {
		defer setSched(schedBatch)
	}
	return syscall.ForkExec(path, argv, attr)
}
