package hub

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/poolrun/poolrun/internal/hubwire"
)

// Serve is the work of a pool's server run as a program of its own, which
// package cluster's StartHub starts with its standard input and output:
// it reads what to listen on from in, starts the server ([Start]) and says
// on out where it listens, then answers the pool's questions, until the end
// of in, when it stops the server. The pool's side is the only writer of
// in: when the pool's process dies, so does the server. Serve returns nil
// at the end of in, and the error of a server that could not start, or of
// a broken exchange, after it has said it on out where it could.
func Serve(in io.Reader, out io.Writer) error {
	r := bufio.NewReader(in)
	enc := json.NewEncoder(out)
	var start hubwire.Start
	if err := readLine(r, &start); err != nil {
		return fmt.Errorf("hub: reading what to serve: %w", err)
	}
	if start.Version != hubwire.Version {
		err := fmt.Errorf("hub: this program speaks version %d of the pool's exchange with its server, the pool version %d: install poolrun and poolrun-hub of one release", hubwire.Version, start.Version)
		enc.Encode(hubwire.Started{Error: err.Error()})
		return err
	}
	var opts []Option
	if start.CertFile != "" || start.KeyFile != "" {
		opts = append(opts, TLSFiles(start.CertFile, start.KeyFile))
	}
	s, err := Start(start.Addr, opts...)
	if err != nil {
		enc.Encode(hubwire.Started{Error: err.Error()})
		return err
	}
	defer s.Close()
	if err := enc.Encode(hubwire.Started{URL: s.URL(), Token: s.Token(), CA: s.CA()}); err != nil {
		return fmt.Errorf("hub: answering the pool: %w", err)
	}
	for {
		var ask hubwire.Ask
		if err := readLine(r, &ask); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("hub: reading the pool's question: %w", err)
		}
		if err := enc.Encode(answer(s, ask)); err != nil {
			return fmt.Errorf("hub: answering the pool: %w", err)
		}
	}
}

// answer answers ask about s.
func answer(s *Server, ask hubwire.Ask) hubwire.Answer {
	switch ask.What {
	case hubwire.AskClients:
		names, err := s.ClientNames()
		if err != nil {
			return hubwire.Answer{Error: err.Error()}
		}
		a := hubwire.Answer{Clients: make([]string, 0, len(names))}
		for n := range names {
			a.Clients = append(a.Clients, n)
		}
		slices.Sort(a.Clients)
		return a
	case hubwire.AskWritten:
		s.WaitWritten(time.Duration(ask.Within))
		return hubwire.Answer{}
	}
	return hubwire.Answer{Error: fmt.Sprintf("hub: no such question %q", ask.What)}
}

// readLine decodes the next line of r into v: io.EOF at the end of r.
func readLine(r *bufio.Reader, v any) error {
	line, err := r.ReadBytes('\n')
	if len(line) == 0 {
		return err
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("%q: %w", line, err)
	}
	return nil
}
