// Package cluster runs one poolrun pool across several hosts, on a NATS
// server with JetStream embedded in the pool's process. It lives apart from
// package engine so that a program that imports engine alone does not link
// NATS (TestEngineAloneLinksNoNATS checks it with go list -deps); the
// poolrun command links it.
//
// On one host nothing changes: the pool's own workers keep their pipes and
// the shared-memory window. Workers on other hosts (or on this one, started
// apart) join the running pool through a join file, and the scheduler gives
// them jobs like any other.
//
// # The pool's side
//
// [Listen] starts the server ([Start]) and writes the join file; pass
// [Listener.Option] to engine.New, and Close the listener after Run has
// returned (it stops the server and removes the join file):
//
//	l, err := cluster.Listen("0.0.0.0:4222", "run.join")
//	if err != nil { ... }
//	defer l.Close()
//	p := engine.New(engine.Workers(2), l.Option()) // or engine.RemoteOnly(wait): no worker of its own
//	// Queue jobs, then p.Run(ctx).
//
// A remote worker's window has the pool's capacity (engine.WindowCapacity),
// as the local ones: a larger set is published as overflowed, and the
// worker keeps everything. The server listens on addr (host:port; "" is
// 127.0.0.1 with a free port). JetStream keeps its state in memory: its
// file store has a limit of
// 0 bytes, and its folder, private and on a memory file system where there
// is one, is removed by Close (and, for a pool killed with SIGKILL, by the
// next pool that starts). Every client must present the pool's random
// token. On any address other than loopback the server speaks TLS only,
// with a certificate signed by an authority made for this pool alone, or
// the user's own ([TLSFiles], then on loopback too). [Outputs] names the
// folders that the pool's jobs write, which a worker checks it can write
// before it joins.
//
// A pool made with engine.RemoteOnly starts no worker of its own and fails
// with an error wrapping engine.ErrNoWorkers when it has had jobs and no
// worker for its wait (poolrun: -j 0 with --listen, and --join-timeout).
//
// # The join file
//
// [Join] is what a worker needs: the server's URL, the pool's token, the
// engine's protocol version and the pool's build (engine.Fingerprint), and
// over TLS the PEM certificate of the pool's authority, which a worker
// trusts and nothing else. [WriteJoinFile] writes it atomically with mode
// 0600; [ReadJoinFile] reads it and says what is wrong with a bad one.
// Whoever can read the file can run the pool's jobs.
//
// # The worker's side
//
// A worker is the pool's own program (the same registered functions): its
// main calls engine.Init first, as every poolrun program does, and then
// [Agent] or [Work] with the join file. [Agent] is a host's agent (poolrun:
// `poolrun worker --join-file F -j N`): one connection to the pool's
// server, and N worker processes behind it, the very processes a local
// pool starts (engine.StartWorkerProcess); each joins as a worker of its
// own, the agent relays its frames between its pipes and its subjects, and
// writes its window, in shared memory, from the pool's sets at the pool's
// generations, so that the workers read it with atomic loads as on the
// pool's host. The agent replaces a worker process that dies while the
// pool runs; asked to stop, its workers leave as a worker of Work does.
// [Work] is one worker in this process, with a connection of its own: it
// subscribes to its subjects, asks to join, and serves jobs with
// engine.Serve until the pool stops it, its connection ends, or its
// context ends. A pool that is not running yet is asked again for up to a
// minute. A worker of another build or protocol is refused with a message
// that names both builds. [Dial] connects to a pool as a worker does, for
// tools that look into a live pool.
//
// # On the wire
//
// Each worker of id ID has four subjects: poolrun.w.ID.jobs (jobs, from the
// pool), poolrun.w.ID.ctl (cancels and revokes), poolrun.w.ID.rep (hello,
// replies, bye) and poolrun.w.ID.ping (liveness); join requests go to
// poolrun.join. The jobs, control and reply subjects carry the pipe
// protocol's frames as byte streams: each write of the engine (a batch of
// frames) is one NATS message, or several of at most 1 MiB for a larger
// one, each with its sequence number; a missing message ends the stream
// and the worker is taken for lost, as one whose pipe broke. These are
// plain NATS subjects, not a JetStream work queue: the pool schedules, and
// a job that started is never run again behind the user's back.
//
// A worker whose context ends (poolrun worker: SIGTERM, Ctrl-C) leaves the
// pool cleanly: it starts no other job, its running job's context is
// cancelled (a job that then returns an error is Aborted, as under a worker
// that died), its cache's cleanups run, and it says goodbye, so that the
// pool gives the jobs it had been sent to other workers at once; Work
// returns nil.
//
// A worker pings every 500 ms; the pool gives up a worker from which it has
// had neither a ping nor a reply for 3 s (its running job is Aborted with
// engine.ErrWorkerDied, or run again where retries were asked for): a long
// reply may hold the pings back. A worker sends each reply through to the
// server (a flush) before it runs its next job, so that a finished job's
// result does not die with a worker that its next job kills; an agent's
// worker writes it to its pipe first, which outlives the worker, and the
// agent sends on, with a flush, what it reads there. A worker (or agent)
// whose connection to the pool's server ends (the pool died) exits at
// once; an agent's workers end with it. An agent killed takes its workers'
// jobs with it: the pool gives them up after the silence of 3 s.
//
// # The window
//
// The windows of an agent's workers travel together: one message on the
// agent's subject poolrun.a.AGENT.win carries the sets that changed since
// the last one, each with its worker's id and generation; the pool sends it
// without waiting for it (coalescing what changes meanwhile), and the agent
// publishes each set in its worker's window in shared memory at that
// generation, which the worker reads with atomic loads: a change costs
// one message per host, not a put per worker. A job that comes before its
// set waits for it, up to a second, as below; a lost message costs memory
// (the worker keeps everything), never a wrong eviction.
//
// The window of a worker of its own ([Work]) is one entry, named by its
// id, of the JetStream key-value bucket poolrun-window: a byte for the
// overflow flag, then the sorted keys, 8 bytes each. Its generation is
// twice the entry's revision. The worker follows the entry with a watch; before it evicts for a job
// stamped with generation g, it waits up to a second until it has seen g,
// with a direct get of the entry half-way through; if it still has not, it
// evicts nothing, runs the job, and says so on its standard error; until
// it has seen its entry once, it keeps everything. A worker never evicts
// by a set older than its job's.
//
// # Limits
//
// Values: a job's argument and its result cross whatever their size up to
// the pool's engine.MaxValueSize (64 MiB by default, up to 1023 MiB); a
// larger value fails its job with an error wrapping engine.ErrTooLarge
// that gives both sizes, and the pool goes on.
//
// A frame larger than 1 MiB travels in messages of 1 MiB (the server
// allows 8 MiB), with flow control: the reader of a stream says how far it
// has read, on the stream's subject with ".ack" added, and its writer
// sends at most 8 MiB (the window) beyond that, and waits. The server and
// the reader's client so hold at most a window of each stream, whatever
// the size of the value: a worker that reads slowly slows the pool's
// writing rather than being dropped, and so does a pool that reads a
// worker's reply slowly; the server holds up to 1 GiB for one connection
// (the windows of 128 streams: an agent's connection carries its workers'
// jobs, the pool's every worker's replies) before it closes it. A writer
// that waits asks its reader every 500 ms how far it has read (subject
// with ".live" added), which a worker busy with a job answers all the
// same; its write fails at once when the reader has closed the stream or
// its connection has ended, and after 30 s without any word from it.
//
// Memory: beyond the windows, a value costs the copies the engine makes of
// it. In the pool: the encoded argument, kept until its job ends, and the
// frame that carries it, while it is sent; the frame of the reply, which
// grows as it arrives, and the decoded result; in a worker, the same the
// other way. With the garbage the collector has not yet taken, a process
// that moves a large value holds several times its size: budget memory
// for it, on the pool's host and the worker's.
//
// # Scale
//
// What limits a pool of many remote workers, in this order:
//
//   - The window's fan-out, for workers of their own: each has its own
//     entry, and the pool publishes a changed set to each with a JetStream
//     put, one after the other, each waiting for its acknowledgement
//     (without the pool's lock, so Queue, Stats and Cancel do not wait,
//     but the scheduler's goroutine does). An agent's workers take one
//     message per host, sent without waiting. With the default
//     engine.EvictStale every worker's set changes when the items of the
//     jobs not yet sent change, and one worker's when only the items of
//     its own jobs do.
//   - Subjects: 4 subjects and one key-value watch per worker on one
//     embedded server (one connection per host, its agent's), and the
//     pool's one connection carries every worker's streams and pings.
//   - The scheduler: one dispatch loop in the pool's process sends every
//     job and takes every reply, so short jobs on many workers wait for
//     the pool.
//
// What would lift them: subjects per host rather than per worker, and
// batches of jobs per message to a host (an agent already sends a batch
// of its workers' replies per message). The
// figures (jobs/s by worker count, the time for a change of the window to
// reach the workers) are in bench/README.md, with their commands.
package cluster
