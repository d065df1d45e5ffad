package cluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/poolrun/poolrun/internal/hubwire"
)

// A Server is the NATS server of a pool that spans hosts, through which
// its [Listener] serves it: package hub's, in this process, or a program
// of its own that [StartHub] started.
type Server interface {
	URL() string   // where clients connect: nats://host:port, tls://host:port
	Token() string // what every client presents
	CA() string    // PEM certificates a client trusts, over TLS; else ""
	// ClientNames returns the names of the clients connected now.
	ClientNames() (map[string]bool, error)
	// WaitWritten waits until the server has written what it holds for
	// every connection, for at most d.
	WaitWritten(d time.Duration)
	Close() error
}

// A HubConfig says what program [StartHub] starts, and what it serves.
type HubConfig struct {
	// Program is the server's program, poolrun-hub or another whose main
	// calls package hub's Serve.
	Program string
	// Addr is where it listens (host:port; port 0 picks a free one; "" is
	// 127.0.0.1:0); CertFile and KeyFile, where not "", the TLS files it
	// presents, as hub.Start and hub.TLSFiles take them.
	Addr, CertFile, KeyFile string
	// Stderr takes the program's standard error (nil: discarded).
	Stderr io.Writer
}

// hubAnswerTimeout bounds the wait for each answer of a hub program: its
// start (the server's, certificates made) and each question.
const hubAnswerTimeout = 30 * time.Second

// StartHub starts the pool's server as a program of its own (see
// [HubConfig]), in a process group of its own (a terminal's Ctrl-C reaches
// the pool, which closes its listener, not the server), with its standard
// input a pipe that this process alone writes: the server ends at the end
// of it, when the Server is closed or this process dies. It returns once
// the server listens, or the program's error.
func StartHub(c HubConfig) (Server, error) {
	cmd := exec.Command(c.Program)
	cmd.Env = append(os.Environ(), hubwire.Env+"=1")
	cmd.Stderr = c.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("cluster: starting the server %s: %w", c.Program, err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("cluster: starting the server %s: %w", c.Program, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cluster: starting the server: %w", err)
	}
	h := &hubProcess{cmd: cmd, in: in, out: bufio.NewReader(out), enc: json.NewEncoder(in)}
	var started hubwire.Started
	err = h.exchange(hubwire.Start{Version: hubwire.Version, Addr: c.Addr, CertFile: c.CertFile, KeyFile: c.KeyFile}, &started)
	if err == nil && started.Error != "" {
		h.Close()
		return nil, fmt.Errorf("cluster: the server %s: %s", c.Program, started.Error)
	}
	if err != nil {
		h.in.Close()
		werr := h.cmd.Wait()
		if werr == nil {
			werr = errors.New("exit status 0")
		}
		return nil, fmt.Errorf("cluster: the server %s ended (%v) before it said where it listens (%v): is it poolrun-hub?", c.Program, werr, err)
	}
	h.url, h.token, h.ca = started.URL, started.Token, started.CA
	return h, nil
}

// A hubProcess is a [Server] in a program of its own.
type hubProcess struct {
	cmd            *exec.Cmd
	in             io.WriteCloser
	url, token, ca string

	mu  sync.Mutex // one exchange at a time
	out *bufio.Reader
	enc *json.Encoder

	closeOnce sync.Once
	closeErr  error
}

func (h *hubProcess) URL() string   { return h.url }
func (h *hubProcess) Token() string { return h.token }
func (h *hubProcess) CA() string    { return h.ca }

func (h *hubProcess) ClientNames() (map[string]bool, error) {
	var a hubwire.Answer
	if err := h.exchange(hubwire.Ask{What: hubwire.AskClients}, &a); err != nil {
		return nil, err
	}
	if a.Error != "" {
		return nil, errors.New(a.Error)
	}
	names := make(map[string]bool, len(a.Clients))
	for _, n := range a.Clients {
		names[n] = true
	}
	return names, nil
}

func (h *hubProcess) WaitWritten(d time.Duration) {
	var a hubwire.Answer
	h.exchange(hubwire.Ask{What: hubwire.AskWritten, Within: int64(d)}, &a)
}

// exchange writes q and reads the answer into a, waiting at most
// hubAnswerTimeout beyond what q itself asks to wait.
func (h *hubProcess) exchange(q any, a any) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.enc.Encode(q); err != nil {
		return fmt.Errorf("asking the server: %w", err)
	}
	wait := hubAnswerTimeout
	if ask, ok := q.(hubwire.Ask); ok {
		wait += time.Duration(ask.Within)
	}
	done := make(chan error, 1)
	go func() {
		line, err := h.out.ReadBytes('\n')
		if err == nil {
			err = json.Unmarshal(line, a)
		} else if errors.Is(err, io.EOF) {
			err = errors.New("the server ended")
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(wait):
		h.cmd.Process.Kill() // the read above ends with the pipe
		return fmt.Errorf("the server did not answer within %v", wait)
	}
}

// Close ends the program: the end of its input, then SIGKILL if it has not
// ended within hubAnswerTimeout. Closing again returns what the first
// Close returned.
func (h *hubProcess) Close() error {
	h.closeOnce.Do(func() {
		h.in.Close()
		t := time.AfterFunc(hubAnswerTimeout, func() { h.cmd.Process.Kill() })
		err := h.cmd.Wait()
		t.Stop()
		if err != nil {
			h.closeErr = fmt.Errorf("cluster: the server %s: %w", h.cmd.Path, err)
		}
	})
	return h.closeErr
}
