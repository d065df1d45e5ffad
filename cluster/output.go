package cluster

import (
	"encoding/binary"
	"io"
	"sync"
)

// What remote workers print. A host agent's worker process prints to
// pipes that the agent copies in whole lines (enginehost.Engine.StartWorkerProcess),
// to an agentOutput: each write becomes a record of the host's up stream
// (recOut, recErr), within the worker's credit of outputWindow
// bytes. On the pool's side the records of a worker go to two pipes that
// the pool reads (enginehost.RemoteWorker's Stdout and Stderr) and writes to
// its own output, as a local worker's; each read grants the agent credit
// again (recGrant). What the pool holds of a worker's output is so
// bounded by the window, whatever the job prints, and the host's stream
// never waits for the pool's terminal: replies and pings go on.

// agentOutput is the output of one of an agent's workers, on the agent's
// side: its writes become records of the host's up stream.
type agentOutput struct {
	up   *sender
	slot uint64

	mu      sync.Mutex
	cond    *sync.Cond
	open    bool   // the pool has been told of the worker (recOpen)
	closed  bool   // what comes is dropped
	sent    uint64 // bytes put on the up stream
	granted uint64 // bytes the pool said it passed on
}

func newAgentOutput(up *sender, slot uint64) *agentOutput {
	o := &agentOutput{up: up, slot: slot}
	o.cond = sync.NewCond(&o.mu)
	return o
}

// stream returns the writer of the worker's standard output (recOut)
// or error (recErr). A Write waits while the pool has not been told of
// the worker, and while the window is full (but a write to an empty
// window goes whatever its size); it fails once the output is closed.
func (o *agentOutput) stream(kind byte) io.Writer { return outputStream{o, kind} }

type outputStream struct {
	o    *agentOutput
	kind byte
}

func (s outputStream) Write(p []byte) (int, error) {
	o := s.o
	o.mu.Lock()
	for !o.closed && (!o.open || o.sent > o.granted && o.sent-o.granted+uint64(len(p)) > outputWindow) {
		o.cond.Wait()
	}
	if o.closed {
		o.mu.Unlock()
		return 0, io.ErrClosedPipe
	}
	o.sent += uint64(len(p))
	// Under the lock: the stream's writes go in the order of their credit.
	err := o.up.put(s.kind, o.slot, p)
	o.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// opened lets the writes go, once the pool has been sent the worker's
// recOpen: records of a worker it does not know yet would be dropped.
func (o *agentOutput) opened() {
	o.mu.Lock()
	o.open = true
	o.cond.Broadcast()
	o.mu.Unlock()
}

// grant notes the pool's recGrant.
func (o *agentOutput) grant(payload []byte) {
	n, k := binary.Uvarint(payload)
	if k <= 0 {
		return
	}
	o.mu.Lock()
	o.granted += n
	o.cond.Broadcast()
	o.mu.Unlock()
}

// close drops what is written from now on; a Write that waits returns.
func (o *agentOutput) close() {
	o.mu.Lock()
	o.closed = true
	o.cond.Broadcast()
	o.mu.Unlock()
}

// slotOutput is one output stream of a host's worker on the pool's side:
// the pipe of its records, which the pool reads (enginehost.RemoteWorker's
// Stdout or Stderr), granting credit as it reads.
type slotOutput struct {
	p *pipe
	c *slotCredit
}

func (o slotOutput) Read(b []byte) (int, error) {
	n, err := o.p.Read(b)
	if n > 0 {
		o.c.passed(n, o.p.empty())
	}
	return n, err
}

// Close drops what the pipe holds and what comes (granted at once, see
// remoteHost.output); a Read that waits returns.
func (o slotOutput) Close() error {
	o.p.Close()
	return nil
}

// slotCredit is what the pool has passed on of a worker's output and not
// yet said to its agent.
type slotCredit struct {
	h    *remoteHost
	slot uint64

	mu     sync.Mutex
	unsaid int
}

// passed notes n more bytes passed on; the agent is told once they make
// a quarter of the window, or the stream that was read is empty (drained).
func (c *slotCredit) passed(n int, drained bool) {
	c.mu.Lock()
	c.unsaid += n
	grant := 0
	if drained || c.unsaid >= outputWindow/4 {
		grant, c.unsaid = c.unsaid, 0
	}
	c.mu.Unlock()
	if grant > 0 {
		c.h.grant(c.slot, grant)
	}
}
