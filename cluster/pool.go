package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/poolrun/poolrun/engine"
)

// Subjects. A worker of id ID reads its jobs on poolrun.w.ID.jobs and its
// cancels and revokes on poolrun.w.ID.ctl, writes its replies on
// poolrun.w.ID.rep and its pings on poolrun.w.ID.ping; it asks to join on
// poolrun.join. Its window is the entry ID of the bucket poolrun-window.
// When the pool's listener closes, it says so on poolrun.end, so that a
// worker that joined late, or still asks to, leaves without an error.
const (
	joinSubject = "poolrun.join"
	endSubject  = "poolrun.end"
	bucketName  = "poolrun-window"
)

// connectWait bounds a worker's connection to the pool's server, its TLS
// handshake included: a pool busy queueing jobs may be slow to answer.
const connectWait = 10 * time.Second

func workerSubject(id, what string) string { return "poolrun.w." + id + "." + what }

// Timing of the liveness pings: a worker pings every pingEvery; the pool
// gives a worker up when it has not heard one for silentFor.
const (
	pingEvery = 500 * time.Millisecond
	silentFor = 3 * time.Second
)

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

// joinRequest is what a worker says when it asks to join.
type joinRequest struct {
	ID string `json:"id"`
	// Agent is the id of the host agent that the worker runs behind:
	// its window travels with those of the agent's other workers.
	Agent    string `json:"agent,omitempty"`
	Host     string `json:"host"`
	PID      int    `json:"pid"`
	Protocol int    `json:"protocol"`
	Build    string `json:"build"`
}

// joinAnswer is the pool's answer: "" to go on, else why not.
type joinAnswer struct {
	Refused string `json:"refused,omitempty"`
	// Capacity is the pool's window capacity (engine.WindowCapacity),
	// for an agent's windows in shared memory.
	Capacity int `json:"capacity,omitempty"`
}

// A Listener is a pool's side of the cluster: its server, its join file,
// and (through [Listener.Option]) the admission of the workers that join.
type Listener struct {
	srv      *Server
	nc       *nats.Conn // the pool's connection: every worker's streams
	kv       nats.KeyValue
	joinFile string

	mu     sync.Mutex
	agents map[string]*hostWindows // the windows of each agent's workers
}

// window makes the pool's side of the window of worker id, behind agent
// (its windows travel with those of the agent's other workers), or of a
// worker of its own (a key-value entry).
func (l *Listener) window(id, agent string, capacity int) engine.WindowPublisher {
	if agent == "" {
		return newKVPublisher(l.kv, id, capacity)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.agents[agent]
	if h == nil {
		if l.agents == nil {
			l.agents = map[string]*hostWindows{}
		}
		h = newHostWindows(l.nc, agent)
		l.agents[agent] = h
	}
	return &workerWindow{host: h, id: id, capacity: capacity}
}

// Clients is the number of clients connected to the pool's server now:
// the pool's own connection, and one per worker or host agent.
func (l *Listener) Clients() int { return l.srv.Clients() }

// Listen starts the pool's server on addr (see [Start], which takes the
// options) and writes the join file at joinFile. Pass l.Option() to
// engine.New, and Close l after Run has returned.
func Listen(addr, joinFile string, options ...ServerOption) (*Listener, error) {
	srv, err := Start(addr, options...)
	if err != nil {
		return nil, err
	}
	copts, err := connectOptions(srv.Join(engine.ProtocolVersion, ""))
	if err != nil {
		srv.Close()
		return nil, err
	}
	nc, err := nats.Connect(srv.URL(), append(copts, nats.Name("poolrun pool"))...)
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("cluster: connecting to the pool's own server: %w", err)
	}
	var kv nats.KeyValue
	js, err := nc.JetStream()
	if err == nil {
		kv, err = js.CreateKeyValue(&nats.KeyValueConfig{Bucket: bucketName, Storage: nats.MemoryStorage, History: 1})
	}
	if err == nil {
		err = WriteJoinFile(joinFile, srv.Join(engine.ProtocolVersion, engine.Fingerprint()))
	}
	if err != nil {
		nc.Close()
		srv.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return &Listener{srv: srv, nc: nc, kv: kv, joinFile: joinFile}, nil
}

// Close stops the server and removes the join file. Workers that are still
// connected (they joined as the pool ended, or still ask to join) are told
// that the pool ended, and leave with no error.
func (l *Listener) Close() error {
	if l.nc.Publish(endSubject, nil) == nil {
		l.nc.FlushTimeout(time.Second)
		// The server has the notice; it must also have written it to
		// every worker before it closes their connections.
		l.srv.waitWritten(time.Second)
	}
	// The join file goes first: a worker on this host that loses its
	// connection without the notice finds it gone (see Work).
	rerr := os.Remove(l.joinFile)
	l.nc.Close()
	err := l.srv.Close()
	if err == nil && !errors.Is(rerr, os.ErrNotExist) {
		err = rerr
	}
	return err
}

// Option admits, while the pool runs, every worker that asks to join and
// is of this build.
func (l *Listener) Option() engine.Option {
	return engine.Joiner(l.admit)
}

// admit answers join requests until ctx ends.
func (l *Listener) admit(ctx context.Context, p *engine.Pool) {
	nc := l.nc
	build := engine.Fingerprint()
	var wg sync.WaitGroup
	defer wg.Wait()
	sub, err := nc.Subscribe(joinSubject, func(m *nats.Msg) {
		var req joinRequest
		answer := func(a joinAnswer) {
			b, _ := json.Marshal(a)
			m.Respond(b)
		}
		if err := json.Unmarshal(m.Data, &req); err != nil || req.ID == "" {
			answer(joinAnswer{Refused: "not a join request"})
			return
		}
		if req.Protocol != engine.ProtocolVersion || req.Build != build {
			answer(joinAnswer{Refused: fmt.Sprintf("the pool's build is %s (protocol %d), the worker's %s (protocol %d): start the same program",
				build, engine.ProtocolVersion, req.Build, req.Protocol)})
			return
		}
		rep, err := newStreamReader(nc, workerSubject(req.ID, "rep"))
		if err != nil {
			answer(joinAnswer{Refused: err.Error()})
			return
		}
		w := engine.RemoteWorker{
			Jobs:    newStreamWriter(nc, workerSubject(req.ID, "jobs")),
			Control: newStreamWriter(nc, workerSubject(req.ID, "ctl")),
			Replies: rep,
			Window:  l.window(req.ID, req.Agent, p.WindowCapacity()),
			Host:    req.Host,
		}
		// The worker subscribed before asking; the answer goes before
		// the handshake, which it then reads.
		answer(joinAnswer{Capacity: p.WindowCapacity()})
		nc.Flush()
		if err := p.Admit(w); err != nil {
			rep.Close()
			return
		}
		wg.Go(func() { watchPings(ctx, nc, req.ID, rep) })
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "poolrun: cluster:", err)
		return
	}
	<-ctx.Done()
	sub.Unsubscribe()
}

// watchPings ends the replies of worker id (so that the pool takes it for
// gone) when neither its pings nor its replies have come for silentFor, or
// ctx ends. Replies count: a reply of many messages may hold the pings
// back in the worker's connection.
func watchPings(ctx context.Context, nc *nats.Conn, id string, rep *streamReader) {
	heard := make(chan struct{}, 1)
	sub, err := nc.Subscribe(workerSubject(id, "ping"), func(*nats.Msg) {
		select {
		case heard <- struct{}{}:
		default:
		}
	})
	if err != nil {
		rep.Close()
		return
	}
	defer sub.Unsubscribe()
	// Replies are counted at each tick: one that came since the last
	// counts as word from the worker then.
	tick := time.NewTicker(pingEvery)
	defer tick.Stop()
	last, replies := time.Now(), rep.heard()
	for {
		select {
		case <-heard:
			last = time.Now()
		case now := <-tick.C:
			if n := rep.heard(); n != replies {
				replies, last = n, now
			}
			if now.Sub(last) >= silentFor {
				rep.closeWith(fmt.Errorf("no word from it for %v", silentFor))
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// Work joins the pool of joinFile as one worker and serves it until the
// pool stops it, the connection ends, or ctx ends. The program must be
// the pool's (the same registered functions, the same protocol), and able
// to write in the pool's output folders ([Join.CheckOutputs]), or it does
// not join.
func Work(ctx context.Context, joinFile string) error {
	s, err := dial(joinFile, "poolrun worker")
	if err != nil {
		return err
	}
	defer s.close()
	id := nuid.Next()
	jobs, err := newStreamReader(s.nc, workerSubject(id, "jobs"))
	if err != nil {
		return err
	}
	defer jobs.Close()
	ctl, err := newStreamReader(s.nc, workerSubject(id, "ctl"))
	if err != nil {
		return err
	}
	defer ctl.Close()
	if _, err := s.join(ctx, id, os.Getpid()); err != nil {
		if errors.Is(err, errPoolEnded) {
			return nil
		}
		return err
	}
	win, err := newKVReader(s.kv, id)
	if err != nil {
		return err
	}
	defer win.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.ping(ctx, id, func() {
		cancel()
		jobs.Close() // the pool is gone: stop waiting for jobs
	})
	rep := newStreamWriter(s.nc, workerSubject(id, "rep"))
	err = engine.Serve(ctx, jobs, flushedWriter{rep}, ctl, win)
	rep.Close()
	if err != nil && s.poolEnded() {
		return nil // it ended as this worker joined
	}
	return err
}

// A session is a worker's (or a host agent's) connection to the pool of a
// join file.
type session struct {
	agent    string // the id of the host agent this session is, if it is one
	j        Join
	joinFile string
	nc       *nats.Conn
	kv       nats.KeyValue
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
	var lostOnce, endOnce sync.Once
	s.nc, err = nats.Connect(j.URL, append(copts, nats.Name(name), nats.MaxReconnects(0), nats.Timeout(connectWait),
		nats.ClosedHandler(func(*nats.Conn) { lostOnce.Do(func() { close(s.lost) }) }))...)
	if err != nil {
		return nil, fmt.Errorf("cluster: joining %s: %w", j.URL, err)
	}
	// The pool says when it has ended: what fails after that is no error.
	s.endSub, err = s.nc.Subscribe(endSubject, func(*nats.Msg) { endOnce.Do(func() { close(s.ended) }) })
	if err != nil {
		s.nc.Close()
		return nil, err
	}
	// The server has the subscription before this worker asks to join: a
	// notice sent after the question reaches it.
	if err := s.nc.Flush(); err != nil {
		s.nc.Close()
		return nil, fmt.Errorf("cluster: joining %s: %w", j.URL, err)
	}
	js, err := s.nc.JetStream()
	if err != nil {
		s.nc.Close()
		return nil, err
	}
	if s.kv, err = js.KeyValue(bucketName); err != nil {
		s.nc.Close()
		return nil, fmt.Errorf("cluster: the window: %w", err)
	}
	return s, nil
}

func (s *session) close() {
	s.endSub.Unsubscribe()
	s.nc.Close()
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
		// (a reset): a join file that is gone says the end too, to
		// a worker on the pool's host.
		select {
		case <-s.ended:
			return true
		case <-time.After(100 * time.Millisecond):
			_, err := os.Stat(s.joinFile)
			return errors.Is(err, os.ErrNotExist)
		}
	default:
		return false
	}
}

// join asks the pool to admit worker id (process pid), whose jobs and
// control subjects are subscribed already, and returns the pool's window
// capacity. The pool may not run yet (its join file is written before): it
// asks again while nobody answers, for up to joinWait. It returns
// errPoolEnded if the pool has ended.
func (s *session) join(ctx context.Context, id string, pid int) (capacity int, err error) {
	host, _ := os.Hostname()
	req, _ := json.Marshal(joinRequest{ID: id, Agent: s.agent, Host: host, PID: pid, Protocol: engine.ProtocolVersion, Build: engine.Fingerprint()})
	var m *nats.Msg
	for start := time.Now(); ; {
		m, err = s.nc.Request(joinSubject, req, 10*time.Second)
		if !errors.Is(err, nats.ErrNoResponders) || time.Since(start) > joinWait {
			break
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-s.ended:
			return 0, errPoolEnded
		}
	}
	if err != nil {
		if s.poolEnded() {
			return 0, errPoolEnded
		}
		return 0, fmt.Errorf("cluster: asking %s to join: %w", s.j.URL, err)
	}
	var a joinAnswer
	if err := json.Unmarshal(m.Data, &a); err != nil {
		return 0, fmt.Errorf("cluster: the pool's answer: %w", err)
	}
	if a.Refused != "" {
		return 0, fmt.Errorf("cluster: the pool refused this worker: %s", a.Refused)
	}
	return a.Capacity, nil
}

// ping says that worker id lives, every pingEvery, until ctx ends; when
// the connection or the pool ends, it calls gone and returns.
func (s *session) ping(ctx context.Context, id string, gone func()) {
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.nc.Publish(workerSubject(id, "ping"), nil)
		case <-s.lost:
			gone()
			return
		case <-s.ended:
			gone()
			return
		case <-ctx.Done():
			return
		}
	}
}

// flushedWriter is the writer of a worker's replies: a write returns once
// the server has the reply (a flush: the client's buffer written out and a
// ping answered). The engine takes a reply for sent when the write returns
// and starts the next job, which may end the process (a crash, a kill, a
// job that exits): a result still in the client's buffer would die with
// the worker, and its finished job with it.
type flushedWriter struct{ *streamWriter }

func (w flushedWriter) Write(p []byte) (int, error) {
	n, err := w.streamWriter.Write(p)
	if err != nil {
		return n, err
	}
	if err := w.nc.Flush(); err != nil {
		return n, fmt.Errorf("cluster: writing to %s: %w", w.subject, err)
	}
	return n, nil
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
