// Package cluster will run one poolrun pool across several hosts, on an
// embedded NATS server with JetStream (issue 12). It lives apart from
// package engine so that a program that imports engine alone does not link
// the NATS server.
//
// # State of this package
//
// Work in progress, on a branch: what is here is the pool's server and its
// join file, not yet a transport of the engine.
//
//   - [Start] starts the pool's NATS server inside the calling process:
//     JetStream on, its store in a private folder on a memory file system
//     (JetStream insists on a folder; nothing is written to disk), which
//     [Server.Close] removes; listening on 127.0.0.1 unless told otherwise;
//     a random token that every client must present.
//   - [Join] is what a worker needs to join the pool: the server's address,
//     the token, the protocol version and the build's fingerprint.
//     [WriteJoinFile] writes it atomically, mode 0600 (it holds the pool's
//     credential: only its owner may read it); [ReadJoinFile] reads it and
//     says what is wrong with it, and where.
//
// # Next
//
// The engine's seam (engine/transport.go: transport, link, msg) is
// unexported, and should stay so. The plan: the engine exports two small
// hooks around what the pipe transport already does, since its frames
// (engine/PROTOCOL.md) need only a byte stream each way and a control
// stream: on the parent's side, a way to admit a worker that joined over
// such streams (a place added while the pool runs, as
// TestWorkersJoinAndLeave does), and on the worker's side, a serve loop
// over them; plus an exported window interface (generation, snapshot, wait
// for a generation) for a window the engine does not make. This package
// then carries each stream on NATS subjects addressed to one worker
// (chunked under the payload limit), keeps the window in one JetStream
// key-value entry (sorted keys and the overflow flag; its revision is the
// generation), and watches connections for deaths (3 s) and the parent
// for its own (5 s).
package cluster
