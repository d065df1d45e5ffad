package cluster_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/poolrun/poolrun/cluster"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/certtest"
)

// TestStartHub: the pool's server as a program of its own (the test
// binary plays poolrun-hub): a pool listens through it, a real agent
// joins and runs every job, the agent leaves with status 0, and Close
// ends the program (the end of its input, as when the pool's process
// dies).
func TestStartHub(t *testing.T) {
	var stderr bytes.Buffer
	srv, err := cluster.StartHub(cluster.HubConfig{Program: os.Args[0], Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srv.URL(), "nats://127.0.0.1:") || len(srv.Token()) != 64 || srv.CA() != "" {
		t.Errorf("URL %q, token of %d characters, CA %q: want nats://127.0.0.1:PORT, 64, none", srv.URL(), len(srv.Token()), srv.CA())
	}
	joinFile := filepath.Join(t.TempDir(), "run.join")
	l, err := cluster.Listen(srv, joinFile)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	names, err := srv.ClientNames()
	if err != nil || len(names) != 1 || !names["poolrun pool"] {
		t.Errorf("clients %v, %v: want the pool's own alone", names, err)
	}
	agents := startAgents(t, joinFile, 1)
	p := engine.New(engine.RemoteOnly(time.Minute), l.Option())
	var jobs []*engine.Job[int]
	for i := range 50 {
		jobs = append(jobs, engine.Queue(p, slowSquare, i))
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, j := range jobs {
		if v, err := j.Result(); err != nil || v != i*i {
			t.Fatalf("job %d: %d, %v", i, v, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v; the program said: %s", err, stderr.String())
	}
	exitZero(t, "agent", agents)
	if _, err := srv.ClientNames(); err == nil {
		t.Error("the server answers after Close")
	}
}

// TestStartHubErrors: what the program cannot serve is refused with its
// reason (a bad address, a certificate of other names), and a program
// that is not a hub with what it is.
func TestStartHubErrors(t *testing.T) {
	dir := t.TempDir()
	cert, key := certtest.NewCA(t).Issue(t, dir, "elsewhere", time.Now().Add(-time.Minute), "pool.example.org")
	for _, c := range []struct {
		name string
		conf cluster.HubConfig
		want string
	}{
		{"bad address", cluster.HubConfig{Program: os.Args[0], Addr: "127.0.0.1:70000"}, `"127.0.0.1:70000": bad port`},
		{"other names", cluster.HubConfig{Program: os.Args[0], Addr: "127.0.0.1:0", CertFile: cert, KeyFile: key}, "covers pool.example.org, not 127.0.0.1"},
		{"no such program", cluster.HubConfig{Program: filepath.Join(dir, "poolrun-hub")}, "no such file"},
		{"not a hub", cluster.HubConfig{Program: "/bin/true"}, "before it said where it listens"},
	} {
		if srv, err := cluster.StartHub(c.conf); err == nil {
			srv.Close()
			t.Errorf("%s: started", c.name)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want it to say %q", c.name, err, c.want)
		}
	}
}
