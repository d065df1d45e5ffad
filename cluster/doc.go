// Package cluster runs one poolrun pool across several hosts, on an
// embedded NATS server with JetStream (issue 12). It lives apart from
// package engine so that a program that imports engine alone does not link
// the NATS server.
//
// # State of this package
//
// Work in progress, on a branch. What is here:
//
//   - [Start] starts the pool's NATS server inside the calling process:
//     JetStream on, with a file store of 0 bytes and its folder private on
//     a memory file system, which [Server.Close] removes; a random token
//     that every client must present; off loopback, TLS with a
//     certificate of an authority made for the pool alone, which the join
//     file carries.
//   - [Join] is what a worker needs to join the pool; [WriteJoinFile]
//     writes it atomically, mode 0600 (it holds the pool's credential);
//     [ReadJoinFile] reads it and says what is wrong with it.
//   - [Listen] starts the server and writes the join file; its
//     [Listener.Option] (engine.Joiner) admits, while the pool runs, each
//     worker that asks to join and is of the pool's build
//     (engine.Fingerprint), through engine.Pool.Admit: the pipe protocol's
//     frames travel as byte streams on subjects of that worker, in
//     messages that carry their place (a lost one ends the stream), and
//     its window is an entry of a JetStream key-value bucket (generation:
//     twice the revision). A worker silent for 3 s is given up.
//   - [Work] is a worker's side (engine.Serve): it asks to join (again
//     while the pool does not answer yet, for a minute), pings, and exits
//     when the pool's server goes.
//
// A pool that starts removes the JetStream folders of pools killed with
// SIGKILL. Values of any size the pool allows cross, in messages of 1 MiB.
//
// A pool made with engine.RemoteOnly starts no worker of its own and gives
// up when it has had none for its wait (poolrun: -j 0 with --listen).
//
// Not yet: the integration tests of package test over this transport; the
// limits at 1,000 workers.
package cluster
