// Package pipecopy copies what comes out of a pipe, from the read end
// this process holds, until the pipe ends; or, once the caller has waited
// long enough for that (processes left behind may hold the pipe open for
// ever), until it has copied what the pipe holds at that moment.
package pipecopy

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"time"
)

// bufSize is the most that one call of a Copy's function gets.
const bufSize = 32 << 10

// bufs holds the copies' buffers between copies: a copy per command of a
// short job would otherwise allocate and clear 32 KiB each time.
var bufs = sync.Pool{New: func() any { return new([bufSize]byte) }}

// MaxDrain bounds what [Copy.End] copies once its deadline has passed:
// what the pipe holds then (a pipe holds 64 KiB by default, 1 MiB at
// most without privileges), and what is written meanwhile, up to this.
const MaxDrain = 1 << 20

// A Copy copies the read end of a pipe to a function.
type Copy struct {
	r    *os.File
	each func([]byte)
	last func()
	done chan struct{}
}

// Start starts copying r, a pipe's read end as [os.Pipe] returns it (one
// that Go's poller waits on), in a goroutine of its own: it calls each
// with what it reads, up to 32 KiB at a time, until the pipe ends (every
// write end is closed) or [Copy.End] stops it; then it calls last, if not
// nil. each may keep no reference to its argument.
func Start(r *os.File, each func([]byte), last func()) *Copy {
	c := &Copy{r: r, each: each, last: last, done: make(chan struct{})}
	go c.run()
	return c
}

// Done is closed when the copy has ended and its last function has
// returned.
func (c *Copy) Done() <-chan struct{} { return c.done }

// End waits for the end of the pipe until deadline. If the pipe has not
// ended by then, the copy goes on without waiting for more: it copies
// what the pipe holds, up to [MaxDrain] bytes, and stops. End returns
// when the copy has ended, and closes r. It returns at once if the copy
// has ended already; a function of the copy that does not return holds
// it up.
func (c *Copy) End(deadline time.Time) {
	select {
	case <-c.done: // the common case, for a command that has exited: no timer
		c.r.Close()
		return
	default:
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-c.done:
	case <-timer.C:
		// A Read that waits returns at once; the copy then reads what is
		// there without waiting.
		if err := c.r.SetReadDeadline(time.Now()); err != nil {
			c.r.Close() // cannot wait with a deadline: stop now
		}
		<-c.done
	}
	c.r.Close()
}

func (c *Copy) run() {
	defer close(c.done)
	if c.last != nil {
		defer c.last()
	}
	buf := bufs.Get().(*[bufSize]byte)
	defer bufs.Put(buf)
	b := buf[:]
	for {
		n, err := c.r.Read(b)
		if n > 0 {
			c.each(b[:n])
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			c.drain(b)
			return
		}
		if err != nil {
			return
		}
	}
}

// drain copies what the pipe holds, without waiting for more, up to
// MaxDrain bytes.
func (c *Copy) drain(b []byte) {
	rc, err := c.r.SyscallConn()
	if err != nil {
		return
	}
	for total := 0; total < MaxDrain; {
		var n int
		var rerr error
		// Control, unlike Read, ignores the deadline; the descriptor is
		// non-blocking, so an empty pipe gives EAGAIN.
		err := rc.Control(func(fd uintptr) {
			for {
				n, rerr = syscall.Read(int(fd), b[:min(len(b), MaxDrain-total)])
				if rerr != syscall.EINTR {
					return
				}
			}
		})
		if err != nil || rerr != nil || n <= 0 {
			return // closed, empty (EAGAIN), or ended
		}
		c.each(b[:n])
		total += n
	}
}
