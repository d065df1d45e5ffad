package execflow

import (
	"sync"
	"syscall"
	"time"

	"github.com/poolrun/poolrun/internal/spawn"
)

// This file ends what a command leaves running outside its process group
// (setsid, or a group of its own) once the command has ended. Such a
// process still bears the command's owner in its OwnerEnv mark, and only
// a look through /proc finds it (spawn.SignalTagged), which reads the
// environment of every process of the host: too dear for every command
// of a run of many short ones. So the looks are shared: one begins at a
// command's end unless one began less than sweepEvery ago; the next then
// begins sweepEvery after that one, for every command that ended
// meanwhile; and the pool's end ([Janitor.Close]) looks at once for what
// is left.
//
// Nothing cheaper tells whether a command left such a process: its group
// may be empty and its pipes closed (a daemon redirects them). Making
// this process a child subreaper (PR_SET_CHILD_SUBREAPER) would make such
// processes its children once their parents die; but each would then end
// as a zombie of this process's that only a wait for any child reaps, a
// wait that can take the exit status that os/exec's Wait of another child
// waits for; and finding a live one would still take a read of /proc (the
// children files, which not every kernel has).

// sweepEvery is the least time between the beginnings of two looks
// through /proc for what ended commands left.
const sweepEvery = time.Second

// killRounds bounds the rounds of SIGKILL to the processes found by their
// mark: a process that forked while the others were killed is found in
// the next.
const killRounds = 10

// killMarked kills with SIGKILL the processes that match finds
// ([spawn.SignalTagged]), in rounds until a round finds none, at most
// killRounds.
func killMarked(match func(entry string) bool) {
	for range killRounds {
		if spawn.SignalTagged(match, syscall.SIGKILL) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leftovers are the commands of this process that have ended while
// processes bearing their owners may still run. Like the scratch folders,
// this state belongs to the process, as its children do.
var leftovers sweeper

// A sweeper kills what ended commands left running, a look through /proc
// at most every sweepEvery (see the top of this file).
type sweeper struct {
	sweeping sync.Mutex // held while a look kills what it found

	mu    sync.Mutex      // guards what follows
	ended map[string]bool // the owners of the commands ended since the last look began
	last  time.Time       // when the last look began
	timer *time.Timer     // the next look, while one is to begin later
}

// end notes that the command whose owner is own has ended (its process
// group is gone), and kills the processes that bear own: in the caller,
// at once, unless a look began less than sweepEvery ago; then in the
// next look, which begins sweepEvery after that one.
func (s *sweeper) end(own string) {
	s.mu.Lock()
	if s.ended == nil {
		s.ended = make(map[string]bool)
	}
	s.ended[own] = true
	now := time.Now()
	due := s.timer == nil && now.Sub(s.last) >= sweepEvery
	if due {
		s.last = now
	} else if s.timer == nil {
		s.timer = time.AfterFunc(s.last.Add(sweepEvery).Sub(now), s.scheduled)
	}
	s.mu.Unlock()
	if due {
		s.sweep()
	}
}

// scheduled is the look that the timer begins.
func (s *sweeper) scheduled() {
	s.mu.Lock()
	s.timer = nil
	s.last = time.Now()
	s.mu.Unlock()
	s.sweep()
}

// flush kills at once what the commands ended so far left, and returns
// once every look under way has ended.
func (s *sweeper) flush() {
	s.mu.Lock()
	if s.timer != nil && s.timer.Stop() {
		s.timer = nil
	}
	// A timer that could not be stopped has fired: its look takes what
	// this one does not, and this one waits for it.
	s.mu.Unlock()
	s.sweep()
}

// sweep kills the processes that bear the owners of the commands ended
// so far.
func (s *sweeper) sweep() {
	s.sweeping.Lock()
	defer s.sweeping.Unlock()
	s.mu.Lock()
	ended := s.ended
	s.ended = nil
	s.mu.Unlock()
	if len(ended) > 0 {
		killMarked(spawn.OwnedByCommands(ended))
	}
}
