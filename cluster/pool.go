package cluster

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/enginehost"
	"github.com/poolrun/poolrun/internal/regfile"
)

// eng is what package engine lends this package (internal/enginehost):
// the joiner option, worker processes, in-process workers, the build's
// fingerprint.
var eng = enginehost.Get[engine.Option]()

// Subjects. A host agent of id AGENT reads what the pool sends it on
// poolrun.a.AGENT.down and writes to it on poolrun.a.AGENT.up (host.go);
// it asks to join on poolrun.join. When the pool's listener closes, it
// says so on poolrun.end, so that an agent that joined late, or still asks
// to, leaves without an error.
const (
	joinSubject = "poolrun.join"
	endSubject  = "poolrun.end"
)

// connectWait bounds a worker's connection to the pool's server, its TLS
// handshake included: a pool busy queueing jobs may be slow to answer.
const connectWait = 10 * time.Second

// Liveness: an agent sends the pool a ping every pingEvery, which says
// when it was sent, and the pool echoes each one while it counts the host
// as its own. The pool gives a host up when the agent's connection to the
// server closes (seen within connsEvery), or when it has heard nothing
// from it for its silence limit (silentFor unless a test says otherwise)
// of the time that the pool ran. The agent's lease lasts half that
// limit from the sending of the latest ping echoed: the pool, which read
// that ping later, gives the host up no sooner than a whole limit after
// it, by which time the agent and its workers have stopped the host's
// jobs (agent.go). The silences are long against a ping: a machine busy
// starting hundreds of processes on two cores may starve a side of a
// second or more.
const (
	pingEvery  = 500 * time.Millisecond
	connsEvery = 250 * time.Millisecond
	silentFor  = 10 * time.Second
)

// agentName is the name of the connection of the agent of id, by which
// the pool sees it closed.
func agentName(id string) string { return "poolrun agent " + id }

// joinWait is how long a worker asks to join a pool whose server runs but
// that does not answer yet (it has not started running).
const joinWait = time.Minute

// connectOptions are the options of a client of the pool of j: its token,
// and, over TLS, trust in the pool's own authority only.
func connectOptions(j Join) ([]nats.Option, error) {
	opts := []nats.Option{nats.Token(j.Token)}
	if j.CA != "" {
		tc, err := clientTLS(j.CA)
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Secure(tc))
	}
	return opts, nil
}

// joinRequest is what a host agent says when it asks to join.
type joinRequest struct {
	// ID is the agent's id, which names its subjects: a plain token
	// (validID).
	ID       string `json:"id"`
	Host     string `json:"host"`
	PID      int    `json:"pid"`
	Protocol int    `json:"protocol"`
	Build    string `json:"build"`
}

// joinAnswer is the pool's answer: "" to go on, else why not.
type joinAnswer struct {
	Refused string `json:"refused,omitempty"`
	// Capacity is the pool's window capacity (engine.WindowCapacity),
	// for the windows of the agent's workers in shared memory.
	Capacity int `json:"capacity,omitempty"`
	// Silence is the pool's silence limit, of which the agent's lease
	// lasts half.
	Silence time.Duration `json:"silence,omitempty"`
}

// A Listener is a pool's side of the cluster: its server, its join file,
// and (through [Listener.Option]) the admission of the host agents that
// join, and of their workers.
type Listener struct {
	srv      Server
	nc       *nats.Conn // the pool's connection: every host's streams
	joinFile string
	joinHeld *os.File      // the join file, open and locked (writeHeldJoinFile)
	silence  time.Duration // the hosts' silence limit

	mu    sync.Mutex
	hosts map[string]*remoteHost // by agent id

	stopConns chan struct{}
	connsDone chan struct{}

	closeOnce sync.Once
	closeErr  error // the first Close's
}

// watchConns gives up the hosts whose agent's connection to the server has
// closed (a SIGKILL, a host that went down with its socket, a network
// that reset), looking every connsEvery, until stopConns closes.
func (l *Listener) watchConns() {
	defer close(l.connsDone)
	t := time.NewTicker(connsEvery)
	defer t.Stop()
	for {
		select {
		case <-l.stopConns:
			return
		case <-t.C:
		}
		l.mu.Lock()
		hosts := make([]*remoteHost, 0, len(l.hosts))
		for _, h := range l.hosts {
			hosts = append(hosts, h)
		}
		l.mu.Unlock()
		if len(hosts) == 0 {
			continue
		}
		open, err := l.srv.ClientNames()
		if err != nil {
			continue
		}
		for _, h := range hosts {
			if !open[agentName(h.id)] {
				h.end(errors.New("its connection to the pool's server closed"))
			}
		}
	}
}

// A ListenOption is an option of [Listen].
type ListenOption func(*listenSettings)

type listenSettings struct {
	outputs []string
}

// Outputs names the folders where the pool's jobs write (absolute paths,
// which must be on storage that every host sees at the same path). The
// join file carries them, and a worker checks that it can write in each
// before it joins ([Join.CheckOutputs]).
func Outputs(dirs ...string) ListenOption {
	return func(s *listenSettings) { s.outputs = append(s.outputs, dirs...) }
}

// Listen serves a pool through srv, its server (package hub's, or one
// that [StartHub] started), and writes the join file at joinFile. Pass
// l.Option() to engine.New, and Close l after Run has returned: that
// closes srv too, which Listen also closes if it fails.
func Listen(srv Server, joinFile string, options ...ListenOption) (*Listener, error) {
	l, err := listen(srv, joinFile, options)
	if err != nil {
		srv.Close()
	}
	return l, err
}

func listen(srv Server, joinFile string, options []ListenOption) (*Listener, error) {
	var set listenSettings
	for _, o := range options {
		o(&set)
	}
	outs := make([]string, 0, len(set.outputs))
	for _, d := range set.outputs {
		if !filepath.IsAbs(d) {
			return nil, fmt.Errorf("cluster: output folder %q: not an absolute path", d)
		}
		outs = append(outs, filepath.Clean(d))
	}
	join := Join{URL: srv.URL(), Token: srv.Token(), Protocol: enginehost.ProtocolVersion, CA: srv.CA(), Outputs: outs}
	copts, err := connectOptions(join)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(join.URL, append(copts, nats.Name("poolrun pool"))...)
	if err != nil {
		return nil, fmt.Errorf("cluster: connecting to the pool's own server: %w", err)
	}
	join.Build = eng.Fingerprint()
	held, err := writeHeldJoinFile(joinFile, join)
	if err != nil {
		nc.Close()
		return nil, err
	}
	l := &Listener{srv: srv, nc: nc, joinFile: joinFile, joinHeld: held, silence: silentFor, stopConns: make(chan struct{}), connsDone: make(chan struct{})}
	go l.watchConns()
	return l, nil
}

// Close closes the server and removes the join file. Workers that are still
// connected (they joined as the pool ended, or still ask to join) are told
// that the pool ended, and leave with no error. Closing again does nothing
// and returns what the first Close returned.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.close() })
	return l.closeErr
}

func (l *Listener) close() error {
	close(l.stopConns)
	<-l.connsDone
	if l.nc.Publish(endSubject, nil) == nil {
		l.nc.FlushTimeout(time.Second)
		// The server has the notice; it must also have written it to
		// every worker before it closes their connections.
		l.srv.WaitWritten(time.Second)
	}
	// The join file goes first: a worker on this host that loses its
	// connection without the notice finds it gone (see session.poolEnded).
	rerr := removeHeldJoinFile(l.joinHeld, l.joinFile)
	l.nc.Close()
	err := l.srv.Close()
	if err == nil && !errors.Is(rerr, os.ErrNotExist) {
		err = rerr
	}
	return err
}

// Option admits, while the pool runs, every host agent that asks to join
// and is of this build, and the workers it starts.
func (l *Listener) Option() engine.Option {
	return eng.Joiner(l.admit)
}

// admit answers join requests until ctx ends. The hosts admitted go on
// until their agents end their streams (the pool stops their workers) or
// fall silent, or the listener closes.
func (l *Listener) admit(ctx context.Context, p enginehost.Pool) {
	nc := l.nc
	build := eng.Fingerprint()
	sub, err := nc.Subscribe(joinSubject, func(m *nats.Msg) {
		var req joinRequest
		answer := func(a joinAnswer) {
			b, _ := json.Marshal(a)
			m.Respond(b)
		}
		if err := json.Unmarshal(m.Data, &req); err != nil {
			answer(joinAnswer{Refused: "not a join request"})
			return
		}
		if !validID(req.ID) {
			answer(joinAnswer{Refused: fmt.Sprintf("the id %.80q is not a plain token (letters, digits, - and _, at most 64)", req.ID)})
			return
		}
		if req.Protocol != enginehost.ProtocolVersion || req.Build != build {
			answer(joinAnswer{Refused: fmt.Sprintf("the pool's build is %s (protocol %d), the worker's %s (protocol %d): start the same program",
				build, enginehost.ProtocolVersion, req.Build, req.Protocol)})
			return
		}
		h, err := l.addHost(ctx, p, req)
		if err != nil {
			answer(joinAnswer{Refused: err.Error()})
			return
		}
		// The agent subscribed to its down stream before it asked; it
		// opens its workers once it has the answer.
		answer(joinAnswer{Capacity: p.WindowCapacity(), Silence: l.silence})
		go h.serve()
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "poolrun: cluster:", err)
		return
	}
	<-ctx.Done()
	sub.Unsubscribe()
}

// addHost makes the pool's side of the host of req.
func (l *Listener) addHost(ctx context.Context, p enginehost.Pool, req joinRequest) (*remoteHost, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ctx.Err() != nil {
		return nil, errors.New("the pool has ended")
	}
	if _, dup := l.hosts[req.ID]; dup {
		return nil, fmt.Errorf("an agent of id %s has joined already", req.ID)
	}
	up, err := newStreamReader(l.nc, hostSubject(req.ID, "up"))
	if err != nil {
		return nil, err
	}
	h := &remoteHost{
		l: l, p: p, id: req.ID, name: req.Host,
		up:    up,
		down:  newSender(newStreamWriter(l.nc, hostSubject(req.ID, "down"))),
		slots: map[uint64]*hostSlot{},
	}
	h.heard.Store(time.Now().UnixNano())
	if l.hosts == nil {
		l.hosts = map[string]*remoteHost{}
	}
	l.hosts[req.ID] = h
	return h, nil
}

func (l *Listener) removeHost(h *remoteHost) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hosts[h.id] == h {
		delete(l.hosts, h.id)
	}
}

// A remoteHost is the pool's side of a host agent: its two streams, and
// its workers, each a remote worker of the pool (enginehost.Pool.Admit) whose
// streams are records of the host's streams.
type remoteHost struct {
	l    *Listener
	p    enginehost.Pool
	id   string // the agent's
	name string // the host's, as the agent said it
	up   *streamReader
	down *sender

	heard atomic.Int64 // when the pool last heard from the host, unix ns

	mu    sync.Mutex
	slots map[uint64]*hostSlot
	ended bool
}

// A hostSlot is one of a host's workers, on the pool's side.
type hostSlot struct {
	replies        *pipe
	stdout, stderr *pipe // what it prints (output.go)
	win            *workerWindow
}

// ends ends the worker's streams: the replies with why, its output with
// io.EOF, after what came of it.
func (s *hostSlot) ends(why error) {
	s.replies.end(why)
	s.stdout.end(io.EOF)
	s.stderr.end(io.EOF)
}

// serve reads the host's records until its stream ends, and watches its
// silence meanwhile.
func (h *remoteHost) serve() {
	stop := make(chan struct{})
	defer close(stop)
	go h.watch(stop)
	rr := newRecordReader(h.up)
	for {
		kind, slot, payload, err := rr.next()
		if err != nil {
			h.end(err)
			return
		}
		h.heard.Store(time.Now().UnixNano())
		switch kind {
		case recOpen:
			h.open(slot)
		case recReply:
			h.mu.Lock()
			s := h.slots[slot]
			h.mu.Unlock()
			if s != nil {
				s.replies.write(payload)
			}
		case recOut, recErr:
			h.output(slot, kind, payload)
		case recEnd:
			h.mu.Lock()
			s := h.slots[slot]
			delete(h.slots, slot)
			h.mu.Unlock()
			if s != nil {
				why := error(io.EOF)
				if len(payload) > 0 {
					why = errors.New(string(payload))
				}
				s.ends(why)
			}
		case recPing:
			h.echo(payload)
		default:
			h.end(fmt.Errorf("a record of kind %d", kind))
			return
		}
	}
}

// output passes a record of what the worker of slot printed to its pipe,
// for the pool to read; what no pipe takes (the worker has ended, or the
// pool no longer reads) is dropped, and its credit granted at once, so
// that the agent does not wait for it.
func (h *remoteHost) output(slot uint64, kind byte, payload []byte) {
	h.mu.Lock()
	s := h.slots[slot]
	h.mu.Unlock()
	p := (*pipe)(nil)
	if s != nil {
		p = s.stdout
		if kind == recErr {
			p = s.stderr
		}
	}
	if p == nil || !p.write(payload) {
		h.grant(slot, len(payload))
	}
}

// grant tells the agent that the pool has passed on n more bytes of the
// output of its worker of slot.
func (h *remoteHost) grant(slot uint64, n int) {
	h.down.put(recGrant, slot, binary.AppendUvarint(nil, uint64(n)))
}

// open admits the host's worker of slot to the pool.
func (h *remoteHost) open(slot uint64) {
	s := &hostSlot{replies: newPipe(), stdout: newPipe(), stderr: newPipe()}
	s.win = &workerWindow{host: h, slot: slot, capacity: h.p.WindowCapacity()}
	credit := &slotCredit{h: h, slot: slot}
	h.mu.Lock()
	if h.ended || h.slots[slot] != nil {
		h.mu.Unlock()
		return
	}
	h.slots[slot] = s
	h.mu.Unlock()
	err := h.p.Admit(enginehost.RemoteWorker{
		Jobs:    &slotWriter{h: h, slot: slot, kind: recJobs},
		Control: &slotWriter{h: h, slot: slot, kind: recCtl},
		Replies: s.replies,
		Window:  s.win,
		Host:    h.name,
		Kill:    func() { h.down.put(recClose, slot, []byte{closeKill}) },
		Stdout:  slotOutput{s.stdout, credit},
		Stderr:  slotOutput{s.stderr, credit},
	})
	if err != nil {
		h.mu.Lock()
		delete(h.slots, slot)
		h.mu.Unlock()
		h.down.put(recClose, slot, []byte{closeRefused})
	}
}

// echo answers a ping of the host's agent (its payload, the time of its
// sending) with the same, unless the host has been given up: under h.mu,
// as the silence is judged, so that no echo follows the decision.
func (h *remoteHost) echo(ping []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.ended && len(ping) > 0 {
		h.down.put(recPing, 0, ping)
	}
}

// watch gives the host up when the pool has heard nothing from it for
// the silence limit of its own running time, until stop closes.
func (h *remoteHost) watch(stop <-chan struct{}) {
	silence := h.l.silence
	t := time.NewTicker(pingEvery / 2)
	defer t.Stop()
	last, msgs := time.Now(), h.up.heard()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			now := time.Now()
			if now.Sub(last) > silence/2 {
				// This process did not run for a while (stopped,
				// say): the host's silence meanwhile says nothing.
				h.heard.Store(now.UnixNano())
			}
			if n := h.up.heard(); n != msgs {
				// Messages from the host wait to be read: it spoke.
				msgs = n
				h.heard.Store(now.UnixNano())
			}
			last = now
			silent := func() bool { return now.Sub(time.Unix(0, h.heard.Load())) >= silence }
			if h.endIf(silent, fmt.Errorf("no word from it for %v", silence)) {
				return
			}
		}
	}
}

// end lets the host go: its workers' replies end with why (nil or io.EOF:
// a clean end, the pool's or the agent's), the agent is told why it was
// given up, and the host's streams close.
func (h *remoteHost) end(why error) { h.endIf(nil, why) }

// endIf is end if cond, called under h.mu, is nil or holds; it reports
// whether it ended the host.
func (h *remoteHost) endIf(cond func() bool, why error) bool {
	h.mu.Lock()
	if h.ended || cond != nil && !cond() {
		h.mu.Unlock()
		return false
	}
	h.ended = true
	slots := h.slots
	h.slots = nil
	h.mu.Unlock()
	h.l.removeHost(h)
	replyErr := error(io.EOF)
	if why != nil && why != io.EOF {
		replyErr = fmt.Errorf("its host %s was given up: %w", h.name, why)
	}
	for _, s := range slots {
		s.ends(replyErr)
	}
	h.up.Close()
	if replyErr == io.EOF {
		h.down.close()
		return true
	}
	// Tell the agent why, if it still hears; do not wait for it.
	h.down.put(recGone, 0, []byte(why.Error()))
	go func() {
		done := make(chan struct{})
		go func() { h.down.close(); close(done) }()
		select {
		case <-done:
		case <-time.After(pingEvery):
			h.down.abort()
		}
	}()
	return true
}

// slotWriter is a stream of the pool to one of a host's workers: its
// jobs, or its control.
type slotWriter struct {
	h    *remoteHost
	slot uint64
	kind byte
}

func (w *slotWriter) Write(p []byte) (int, error) {
	if err := w.h.down.put(w.kind, w.slot, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close of the jobs stream tells the agent that the pool has left the
// worker: the worker's jobs end, and it goes.
func (w *slotWriter) Close() error {
	if w.kind == recJobs {
		w.h.down.put(recClose, w.slot, []byte{closeLeave})
	}
	return nil
}

// A session is a host agent's connection to the pool of a join file.
type session struct {
	j        Join
	joinFile string
	joinOpen *os.File // the join file as dial read it; nil if it could not be opened
	nc       *nats.Conn
	endSub   *nats.Subscription
	lost     chan struct{} // the connection ended
	ended    chan struct{} // the pool said that it has ended
}

// errPoolEnded says that the pool ended before a worker could join it.
var errPoolEnded = errors.New("cluster: the pool has ended")

// dial connects to the pool of joinFile, after checking that this host can
// write in its output folders; name names the client to the server.
func dial(joinFile, name string) (*session, error) {
	j, err := ReadJoinFile(joinFile)
	if err != nil {
		return nil, err
	}
	if err := j.CheckOutputs(); err != nil {
		return nil, err
	}
	copts, err := connectOptions(j)
	if err != nil {
		return nil, err
	}
	s := &session{j: j, joinFile: joinFile, lost: make(chan struct{}), ended: make(chan struct{})}
	s.joinOpen, _ = regfile.Open(joinFile)
	var lostOnce, endOnce sync.Once
	s.nc, err = nats.Connect(j.URL, append(copts, nats.Name(name), nats.MaxReconnects(0), nats.Timeout(connectWait),
		nats.ClosedHandler(func(*nats.Conn) { lostOnce.Do(func() { close(s.lost) }) }))...)
	if err != nil {
		if s.joinOpen != nil {
			s.joinOpen.Close()
		}
		return nil, fmt.Errorf("cluster: joining %s: %w", j.URL, err)
	}
	// The pool says when it has ended: what fails after that is no error.
	s.endSub, err = s.nc.Subscribe(endSubject, func(*nats.Msg) { endOnce.Do(func() { close(s.ended) }) })
	if err != nil {
		s.close()
		return nil, err
	}
	// The server has the subscription before this worker asks to join: a
	// notice sent after the question reaches it.
	if err := s.nc.Flush(); err != nil {
		s.close()
		return nil, fmt.Errorf("cluster: joining %s: %w", j.URL, err)
	}
	return s, nil
}

func (s *session) close() {
	s.endSub.Unsubscribe()
	s.nc.Close()
	if s.joinOpen != nil {
		s.joinOpen.Close()
	}
}

// poolEnded reports whether the pool has said that it ended.
func (s *session) poolEnded() bool {
	select {
	case <-s.ended:
		return true
	case <-s.lost:
		// The end notice comes before the connection's end; give its
		// handler a moment. A server that closes a connection the
		// worker has just written to may drop what it had sent
		// (a reset): a join file that the pool emptied and removed
		// says the end too, to a worker on the pool's host. One that a
		// janitor removed (its pool was killed) is not emptied.
		select {
		case <-s.ended:
			return true
		case <-time.After(100 * time.Millisecond):
			if _, err := os.Stat(s.joinFile); !errors.Is(err, os.ErrNotExist) || s.joinOpen == nil {
				return false
			}
			fi, err := s.joinOpen.Stat()
			return err == nil && fi.Size() == 0
		}
	default:
		return false
	}
}

// join asks the pool to admit the agent of id, which has subscribed to
// its down stream already, and returns the pool's answer: its window
// capacity and its silence limit. The pool may not run yet (its join file
// is written before): it asks again while nobody answers, for up to
// joinWait. It returns errPoolEnded if the pool has ended.
func (s *session) join(ctx context.Context, id string) (joinAnswer, error) {
	host, _ := os.Hostname()
	req, _ := json.Marshal(joinRequest{ID: id, Host: host, PID: os.Getpid(), Protocol: enginehost.ProtocolVersion, Build: eng.Fingerprint()})
	var m *nats.Msg
	var err error
	for start := time.Now(); ; {
		m, err = s.nc.Request(joinSubject, req, 10*time.Second)
		if !errors.Is(err, nats.ErrNoResponders) || time.Since(start) > joinWait {
			break
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return joinAnswer{}, ctx.Err()
		case <-s.ended:
			return joinAnswer{}, errPoolEnded
		}
	}
	if err != nil {
		if s.poolEnded() {
			return joinAnswer{}, errPoolEnded
		}
		return joinAnswer{}, fmt.Errorf("cluster: asking %s to join: %w", s.j.URL, err)
	}
	var a joinAnswer
	if err := json.Unmarshal(m.Data, &a); err != nil {
		return joinAnswer{}, fmt.Errorf("cluster: the pool's answer: %w", err)
	}
	if a.Refused != "" {
		return joinAnswer{}, fmt.Errorf("cluster: the pool refused this host: %s", a.Refused)
	}
	return a, nil
}

// Dial connects to the pool of joinFile as a client, as a worker does:
// with its token, and over TLS trusting the pool's authority only.
func Dial(joinFile string) (*nats.Conn, error) {
	j, err := ReadJoinFile(joinFile)
	if err != nil {
		return nil, err
	}
	opts, err := connectOptions(j)
	if err != nil {
		return nil, err
	}
	return nats.Connect(j.URL, append(opts, nats.MaxReconnects(0))...)
}
