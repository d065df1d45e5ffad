package hub

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// readyTimeout bounds the wait for the embedded server to accept clients.
const readyTimeout = 10 * time.Second

// maxPayload is the largest message the server takes: package cluster
// sends a stream's bytes in chunks of 1 MiB.
const maxPayload = 8 << 20

// maxPending is what the server holds for one connection, past which it
// closes it as a slow consumer: the windows of 128 of package cluster's
// streams, of 8 MiB each. The streams' flow control bounds it to a window
// for each stream the connection reads: an agent's connection reads its
// workers' jobs, the pool's every worker's replies. The server's default,
// 64 MiB, is eight windows: as many streams at once behind a network
// slower than the pool writes, or a pool's process stalled a moment,
// would lose the connection and every worker behind it.
const maxPending = 128 * 8 << 20

// A Server is a pool's NATS server, running in this process.
type Server struct {
	ns    *server.Server
	token string
	url   string
	ca    string // PEM of what a worker trusts, with TLS
}

// An Option is an option of [Start].
type Option func(*settings)

type settings struct {
	certFile, keyFile string
}

// TLSFiles makes the server present the certificate of certFile (PEM: the
// server's certificate first, then any intermediates) with the private key
// of keyFile, on any address, loopback included, instead of certificates
// made for the pool. The certificate must cover the host of the listen
// address (for 0.0.0.0 or ::, this host's name or one of its addresses),
// and its key must match it. The join file then carries the certificates
// of certFile, and a worker trusts those and nothing else (the system's
// roots play no part, so a certificate of a public authority and one of
// a private one work alike).
func TLSFiles(certFile, keyFile string) Option {
	return func(s *settings) { s.certFile, s.keyFile = certFile, keyFile }
}

// Start starts a NATS server in this process, listening on addr
// (host:port; port 0 picks a free one; "" is 127.0.0.1:0), with a new
// random token that every client must present. It keeps nothing on disk.
// Off loopback the server speaks TLS, with certificates made for the pool
// unless [TLSFiles] gives its own.
func Start(addr string, options ...Option) (*Server, error) {
	var set settings
	for _, o := range options {
		o(&set)
	}
	if (set.certFile == "") != (set.keyFile == "") {
		return nil, errors.New("hub: a TLS certificate needs its key, and a key its certificate")
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("hub: listen address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("hub: listen address %q: bad port %q", addr, portText)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	var own *ownCert
	if set.certFile != "" {
		// Before anything is made: a bad certificate leaves nothing behind.
		if own, err = loadCert(set.certFile, set.keyFile, host); err != nil {
			return nil, err
		}
	}
	opts := &server.Options{}
	opts.Host, opts.Port = host, port
	opts.Authorization = token
	opts.NoSigs, opts.NoLog = true, true
	opts.MaxPayload = maxPayload
	opts.MaxPending = maxPending
	// Off loopback, TLS, with certificates made for this pool.
	urlHost := host
	scheme := "nats"
	var caPEM []byte
	if own != nil {
		opts.TLS = true
		opts.TLSConfig = &tls.Config{Certificates: []tls.Certificate{own.cert}, MinVersion: tls.VersionTLS12}
		opts.TLSTimeout = 5
		urlHost, scheme, caPEM = own.name, "tls", own.trust
	} else if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		names, err := listenNames(host)
		if err != nil {
			return nil, err
		}
		cert, ca, err := poolCerts(names)
		if err != nil {
			return nil, fmt.Errorf("hub: certificates: %w", err)
		}
		opts.TLS = true
		opts.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		opts.TLSTimeout = 5
		urlHost, scheme, caPEM = names[0], "tls", ca
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("hub: starting the server: %w", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(readyTimeout) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("hub: the server on %s did not accept clients within %v", addr, readyTimeout)
	}
	s := &Server{ns: ns, token: token, ca: string(caPEM)}
	a, ok := ns.Addr().(*net.TCPAddr)
	if !ok {
		s.Close()
		return nil, errors.New("hub: the server has no TCP address")
	}
	if urlHost == "" || caPEM == nil {
		urlHost = a.IP.String()
	}
	s.url = scheme + "://" + net.JoinHostPort(urlHost, strconv.Itoa(a.Port))
	return s, nil
}

// URL returns the address clients connect to, nats://host:port.
func (s *Server) URL() string { return s.url }

// Token returns the random token that every client must present.
func (s *Server) Token() string { return s.token }

// CA returns the PEM certificates that a client trusts, over TLS, and ""
// on loopback without [TLSFiles].
func (s *Server) CA() string { return s.ca }

// WaitWritten waits until the server has written what it holds for every
// connection, for at most d.
func (s *Server) WaitWritten(d time.Duration) {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		cz, err := s.ns.Connz(&server.ConnzOptions{})
		if err != nil {
			return
		}
		pending := false
		for _, c := range cz.Conns {
			pending = pending || c.Pending > 0
		}
		if !pending {
			return
		}
	}
}

// ClientNames returns the names of the clients connected now.
func (s *Server) ClientNames() (map[string]bool, error) {
	cz, err := s.ns.Connz(&server.ConnzOptions{Limit: 1 << 20})
	if err != nil {
		return nil, err
	}
	names := make(map[string]bool, len(cz.Conns))
	for _, c := range cz.Conns {
		names[c.Name] = true
	}
	return names, nil
}

// Messages is the number of messages that the server has taken from its
// clients so far: with the host's batching, it grows with the dispatch
// rounds and the hosts, not with the jobs.
func (s *Server) Messages() int64 {
	v, err := s.ns.Varz(nil)
	if err != nil {
		return 0
	}
	return v.InMsgs
}

// Clients is the number of clients connected to the server now: the
// pool's own connection, and one per worker or host agent.
func (s *Server) Clients() int { return s.ns.NumClients() }

// Close stops the server and closes its port.
func (s *Server) Close() error {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
	return nil
}

// newToken returns 32 random bytes in hexadecimal.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("hub: token: %w", err)
	}
	return hex.EncodeToString(b), nil
}
