package cluster_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/poolrun/poolrun/cluster"
	"github.com/poolrun/poolrun/cluster/hub"
)

// TestServer: a client with the pool's token connects and messages pass;
// one without it, or with another, is refused; after Close the port is
// closed. JetStream is off: the server keeps nothing, on disk or else.
func TestServer(t *testing.T) {
	s, err := hub.Start("")
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	if !strings.HasPrefix(s.URL(), "nats://127.0.0.1:") {
		t.Errorf("URL %q, want nats://127.0.0.1:PORT", s.URL())
	}
	j := joinOf(s)

	nc, err := nats.Connect(j.URL, nats.Token(j.Token))
	if err != nil {
		t.Fatalf("with the token: %v", err)
	}
	sub, err := nc.SubscribeSync("poolrun.test")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("poolrun.test", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(5 * time.Second); err != nil || string(m.Data) != "hello" {
		t.Fatalf("message: %v, %v", m, err)
	}
	if js, err := nc.JetStream(); err == nil {
		if _, err := js.AccountInfo(); err == nil {
			t.Error("JetStream answers: the server may keep streams")
		}
	}
	nc.Close()

	for name, opts := range map[string][]nats.Option{
		"no token":      nil,
		"another token": {nats.Token(strings.Repeat("0", 64))},
	} {
		if nc, err := nats.Connect(j.URL, append(opts, nats.MaxReconnects(0))...); err == nil {
			nc.Close()
			t.Errorf("%s: connected", name)
		} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Errorf("%s: %v, want an authorization error", name, err)
		}
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	if c, err := net.DialTimeout("tcp", strings.TrimPrefix(j.URL, "nats://"), time.Second); err == nil {
		c.Close()
		t.Errorf("the port of %s is still open after Close", j.URL)
	}
}

// TestStartBadAddress: a listen address that is not host:port, or whose
// port is not one, is refused with a message that names it.
func TestStartBadAddress(t *testing.T) {
	for _, addr := range []string{"localhost", "127.0.0.1:http", "127.0.0.1:70000"} {
		if s, err := hub.Start(addr); err == nil {
			s.Close()
			t.Errorf("Start(%q) succeeded", addr)
		} else if !strings.Contains(err.Error(), addr) {
			t.Errorf("Start(%q): %v, want the address named", addr, err)
		}
	}
}

// TestJoinFile: a join file is written with mode 0600 and read back; a
// file that is not a join file is refused with a message naming it; one
// that group or others have any permission on is refused with its mode
// and the chmod that fixes it, as is one with data after its JSON object;
// white space after the object is allowed.
func TestJoinFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.join")
	want := cluster.Join{URL: "nats://127.0.0.1:4222", Token: "t0k", Protocol: 5, Build: "b", Outputs: []string{"/shared/out"}}
	if err := cluster.WriteJoinFile(path, want); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600: the file holds the pool's credential", fi.Mode().Perm())
	}
	if got, err := cluster.ReadJoinFile(path); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("read back %+v, %v; want %+v", got, err, want)
	}
	for name, text := range map[string]string{
		"not json":      "url = x\n",
		"unknown field": `{"url":"nats://x:1","token":"t","protocol":5,"colour":"red"}`,
		"no token":      `{"url":"nats://x:1","protocol":5}`,
		"no url":        `{"token":"t","protocol":5}`,
		"no protocol":   `{"url":"nats://x:1","token":"t"}`,
		"relative out":  `{"url":"nats://x:1","token":"t","protocol":5,"outputs":["out"]}`,
		"huge":          strings.Repeat(" ", 70<<10),
	} {
		bad := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(bad, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := cluster.ReadJoinFile(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s: %v, want an error naming %s", name, err, bad)
		}
	}

	const valid = `{"url":"nats://x:1","token":"t","protocol":5}`
	for _, tt := range []struct {
		name string
		text string
		mode os.FileMode
		want []string // in the error, with the path; none: accepted
	}{
		{"private", valid, 0o600, nil},
		{"owner only", valid, 0o700, nil},
		{"readable by all", valid, 0o644, []string{"mode 0644", "chmod 600 "}},
		{"readable by group", valid, 0o640, []string{"mode 0640", "chmod 600 "}},
		{"writable by others", valid, 0o602, []string{"mode 0602", "chmod 600 "}},
		{"trailing newline", valid + "\n", 0o600, nil},
		{"trailing white space", valid + " \t\r\n \n", 0o600, nil},
		{"trailing object", valid + "\n{}", 0o600, []string{fmt.Sprintf("byte %d: data after the join object", len(valid)+2)}},
		{"trailing x", valid + "x", 0o600, []string{fmt.Sprintf("byte %d: data after the join object", len(valid)+1)}},
		{"second join", valid + valid, 0o600, []string{"data after the join object"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".join")
			if err := os.WriteFile(path, []byte(tt.text), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil { // whatever the umask
				t.Fatal(err)
			}
			_, err := cluster.ReadJoinFile(path)
			switch {
			case tt.want == nil && err != nil:
				t.Errorf("mode %04o, %q: %v, want it read", tt.mode, tt.text, err)
			case tt.want == nil:
			case err == nil:
				t.Errorf("mode %04o, %q: read, want it refused", tt.mode, tt.text)
			default:
				for _, w := range append(tt.want, path) {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("mode %04o, %q: %v, want %q in the error", tt.mode, tt.text, err, w)
					}
				}
			}
		})
	}
}

// TestServerTLS: off loopback, the server speaks TLS with a certificate of
// the pool's own authority, which the join file carries: a client that
// trusts it connects; one that trusts only the system's authorities, or
// speaks plain TCP, is refused.
func TestServerTLS(t *testing.T) {
	s, err := hub.Start("0.0.0.0:0")
	if err != nil {
		t.Skip("no address other than loopback here:", err)
	}
	defer s.Close()
	j := joinOf(s)
	if !strings.HasPrefix(j.URL, "tls://") || !strings.Contains(j.CA, "BEGIN CERTIFICATE") {
		t.Fatalf("join %+v: want a tls:// URL and the authority's certificate", j)
	}
	dir := t.TempDir()
	joinFile := filepath.Join(dir, "run.join")
	if err := cluster.WriteJoinFile(joinFile, j); err != nil {
		t.Fatal(err)
	}
	ok, err := cluster.Dial(joinFile)
	if err != nil {
		t.Fatalf("with the join file's authority: %v", err)
	}
	ok.Close()
	if nc, err := nats.Connect(j.URL, nats.Token(j.Token), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Error("a client that does not trust the pool's authority connected")
	}
	plain := "nats://" + strings.TrimPrefix(j.URL, "tls://")
	if nc, err := nats.Connect(plain, nats.Token(j.Token), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Error("a plain client connected")
	}
}
