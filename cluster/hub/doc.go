// Package hub runs the NATS server of a pool that spans hosts, which
// package cluster's Listener serves the pool through: in this process
// ([Start]), or as a program of its own ([Serve]; the poolrun-hub
// command), which cluster.StartHub starts and talks to over its standard
// input and output.
//
// It lives apart from package cluster so that a program that joins pools
// or starts their server as its own process does not link the server,
// most of the poolrun command's size and of its start-up: poolrun links
// cluster, and starts poolrun-hub only for run --listen.
//
// A pool in one Go program, with its server in the same process:
//
//	srv, err := hub.Start("0.0.0.0:4222")
//	if err != nil { ... }
//	l, err := cluster.Listen(srv, "run.join") // l.Close closes srv
//	if err != nil { ... }
//	defer l.Close()
//	p := engine.New(engine.Workers(2), l.Option())
//
// The server listens on addr (host:port; "" is 127.0.0.1 with a free
// port), keeps nothing on disk, and has one client per host agent and the
// pool's own. Every client must present the pool's random token. On any
// address other than loopback it speaks TLS only, with a certificate
// signed by an authority made for this pool alone, or the user's own
// ([TLSFiles], then on loopback too).
package hub
