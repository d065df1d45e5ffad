package cluster_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/poolrun/poolrun/cluster"
	"github.com/poolrun/poolrun/cluster/hub"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/certtest"
)

// TestServerOwnCert: with TLSFiles the server presents the given
// certificate, on loopback too; the join file carries it, and a client
// that trusts it connects; one without it (plain, or trusting only the
// system's roots) is refused.
func TestServerOwnCert(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := certtest.NewCA(t).Issue(t, dir, "pool", time.Now().Add(-time.Minute), "127.0.0.1", "localhost")
	s, err := hub.Start("127.0.0.1:0", hub.TLSFiles(certFile, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	j := joinOf(s)
	certPEM, _ := os.ReadFile(certFile)
	if !strings.HasPrefix(j.URL, "tls://127.0.0.1:") || j.CA != string(certPEM) {
		t.Fatalf("join %+v: want a tls://127.0.0.1 URL and the certificate of %s", j, certFile)
	}
	joinFile := filepath.Join(dir, "run.join")
	if err := cluster.WriteJoinFile(joinFile, j); err != nil {
		t.Fatal(err)
	}
	nc, err := cluster.Dial(joinFile)
	if err != nil {
		t.Fatalf("trusting the join file's certificate: %v", err)
	}
	nc.Close()
	if nc, err := nats.Connect(j.URL, nats.Token(j.Token), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Error("a client that trusts only the system's roots connected")
	}
	plain := "nats://" + strings.TrimPrefix(j.URL, "tls://")
	if nc, err := nats.Connect(plain, nats.Token(j.Token), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Error("a plain client connected")
	}
}

// TestServerOwnCertErrors: a certificate file or key file that cannot be
// read, a key of another certificate, a certificate that has expired or
// that covers other names, a file that holds no certificate, and one of
// the two files without the other are refused before anything starts,
// with errors that say what is wrong and where.
func TestServerOwnCertErrors(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t)
	now := time.Now().Add(-time.Minute)
	cert, key := ca.Issue(t, dir, "good", now, "127.0.0.1")
	_, otherKey := ca.Issue(t, dir, "other", now, "127.0.0.1")
	elsewhere, elsewhereKey := ca.Issue(t, dir, "elsewhere", now, "pool.example.org", "192.0.2.7")
	old, oldKey := ca.Issue(t, dir, "old", now.Add(-3*time.Hour), "127.0.0.1")
	notPEM := filepath.Join(dir, "notpem.crt")
	os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600)
	missing := filepath.Join(dir, "missing.crt")
	for _, c := range []struct {
		name, cert, key string
		want            []string
	}{
		{"missing certificate", missing, key, []string{missing, "no such file"}},
		{"missing key", cert, missing, []string{missing, "no such file"}},
		{"no certificate in file", notPEM, key, []string{notPEM, "no PEM certificate"}},
		{"key of another certificate", cert, otherKey, []string{otherKey, cert, "does not match"}},
		{"other names", elsewhere, elsewhereKey, []string{elsewhere, "covers pool.example.org, 192.0.2.7, not 127.0.0.1"}},
		{"expired", old, oldKey, []string{old, "not now"}},
		{"certificate alone", cert, "", []string{"needs its key"}},
		{"key alone", "", key, []string{"needs its key"}},
	} {
		s, err := hub.Start("127.0.0.1:0", hub.TLSFiles(c.cert, c.key))
		if err == nil {
			s.Close()
			t.Errorf("%s: started", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want it to say %q", c.name, err, w)
			}
		}
	}
}

// TestClusterOwnCert: a real worker process joins a pool whose server
// presents a certificate given with TLSFiles, runs jobs, and its host
// name reaches the pool's figures.
func TestClusterOwnCert(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := certtest.NewCA(t).Issue(t, dir, "pool", time.Now().Add(-time.Minute), "127.0.0.1")
	joinFile := filepath.Join(dir, "run.join")
	srv, err := hub.Start("127.0.0.1:0", hub.TLSFiles(certFile, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	l, err := cluster.Listen(srv, joinFile)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ws := startWorkers(t, joinFile, 1)
	p := engine.New(engine.RemoteOnly(time.Minute), l.Option())
	var jobs []*engine.Job[int]
	for i := range 20 {
		jobs = append(jobs, engine.Queue(p, slowSquare, i))
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	squaresRight(t, jobs)
	host, _ := os.Hostname()
	st := p.Stats()
	if len(st.Workers) != 1 || st.Workers[0].Jobs != len(jobs) || st.Workers[0].Host != host {
		t.Errorf("workers %+v: want one, of host %q, that ran the %d jobs", st.Workers, host, len(jobs))
	}
	if err := ws[0].Wait(); err != nil {
		t.Errorf("the worker: %v", err)
	}
}

// TestServerOwnCertAnyAddress: listening on every address, the server
// takes a certificate that covers one of this host's addresses, and the
// join file's URL gives that address; one that covers none of this host's
// names is refused with an error that lists them.
func TestServerOwnCertAnyAddress(t *testing.T) {
	var ip string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			ip = n.IP.String()
			break
		}
	}
	if ip == "" {
		t.Skip("no address other than loopback here")
	}
	dir := t.TempDir()
	ca := certtest.NewCA(t)
	certFile, keyFile := ca.Issue(t, dir, "pool", time.Now().Add(-time.Minute), ip)
	s, err := hub.Start("0.0.0.0:0", hub.TLSFiles(certFile, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	j := joinOf(s)
	if !strings.HasPrefix(j.URL, "tls://"+net.JoinHostPort(ip, "")) {
		t.Errorf("URL %s, want tls://%s:PORT", j.URL, ip)
	}
	joinFile := filepath.Join(dir, "run.join")
	if err := cluster.WriteJoinFile(joinFile, j); err != nil {
		t.Fatal(err)
	}
	nc, err := cluster.Dial(joinFile)
	if err != nil {
		t.Fatalf("trusting the join file's certificate: %v", err)
	}
	nc.Close()

	other, otherKey := ca.Issue(t, dir, "other", time.Now().Add(-time.Minute), "pool.example.org")
	if s, err := hub.Start("0.0.0.0:0", hub.TLSFiles(other, otherKey)); err == nil {
		s.Close()
		t.Error("a certificate for pool.example.org served on every address of this host")
	} else if !strings.Contains(err.Error(), "covers pool.example.org, not ") || !strings.Contains(err.Error(), ip) {
		t.Errorf("%v: want it to say what the certificate covers and this host's names (%s among them)", err, ip)
	}
}
