// Package cluster runs one poolrun pool across several hosts, through a
// NATS server: package hub's, in the pool's process, or a program of its
// own ([StartHub]: poolrun-hub, which poolrun run --listen starts). It
// lives apart from package engine so that a program that imports engine
// alone does not link NATS (TestEngineAloneLinksNoNATS checks it with go
// list -deps); and apart from package hub so that the poolrun command
// links NATS's client, not its server.
//
// On one host nothing changes: the pool's own workers keep their pipes and
// the shared-memory window. On every other host (or on this one, started
// apart) one host agent joins the running pool through a join file, with
// its worker processes, and the scheduler gives them jobs like any other:
// it still knows which worker holds which item, and evicts, budgets and
// retries as on one host.
//
// # The pool's side
//
// [Listen] serves the pool through a [Server] and writes the join file;
// pass [Listener.Option] to engine.New, and Close the listener after Run
// has returned (it closes the server and removes the join file):
//
//	srv, err := hub.Start("0.0.0.0:4222") // or StartHub(HubConfig{Program: "poolrun-hub", Addr: ...})
//	if err != nil { ... }
//	l, err := cluster.Listen(srv, "run.join")
//	if err != nil { ... }
//	defer l.Close()
//	p := engine.New(engine.Workers(2), l.Option()) // or engine.RemoteOnly(wait): no worker of its own
//	// Queue jobs, then p.Run(ctx).
//
// A remote worker's window has the pool's capacity (engine.WindowCapacity),
// as the local ones: a larger set is published as overflowed, and the
// worker keeps everything. The server (see package hub) keeps nothing on
// disk, has one client per host agent and the pool's own, each of which
// presents the pool's random token, and off loopback speaks TLS only.
// [Outputs] names the folders that the pool's jobs write, which a worker
// checks it can write before it joins.
//
// A pool made with engine.RemoteOnly starts no worker of its own and fails
// with an error wrapping engine.ErrNoWorkers when it has had jobs and no
// worker for its wait (poolrun: -j 0 with --listen, and --join-timeout).
//
// # The join file
//
// [Join] is what a worker needs: the server's URL, the pool's token, the
// engine's protocol version and the pool's build (a hash of the protocol
// version and the registered functions' names), and over TLS the PEM
// certificate of the pool's authority, which a worker trusts and nothing
// else. [WriteJoinFile] writes it atomically with mode
// 0600; [ReadJoinFile] reads it and says what is wrong with a bad one.
// Whoever can read the file can run the pool's jobs, so the file must be
// private, as ssh asks of a private key: ReadJoinFile refuses one that
// gives group or others any permission (keep it mode 0600), and one with
// anything but white space after its JSON object. Whoever can write it
// chooses the pool whose commands a worker runs, so ReadJoinFile also
// refuses a file that the reading process's user does not own, root
// included. While the pool runs, its [Listener] holds a shared flock(2)
// of the join file; [Listener.Close] removes the file, unless another
// pool has written its own there since. A process that can lock the file
// exclusively knows its pool is gone: poolrun's janitor removes a killed
// pool's join file so, and [Listen] refuses to write over a join file
// that a running pool holds.
//
// # The host agent
//
// A worker is the pool's own program (the same registered functions): its
// main calls engine.Init first, as every poolrun program does, and then
// [Agent] with the join file (poolrun: `poolrun worker --join-file F -j
// N`). The agent holds the host's one connection to the pool's server. It
// starts N worker processes, the very processes a local pool starts, and
// relays their frames between their pipes and the host's streams. It
// writes each one's window, in shared memory, from the pool's sets at the
// pool's generations, so that the workers read it with atomic loads as on
// the pool's host: the single-host mechanism,
// unchanged, on every host. A pool that is not running yet is asked again
// for up to a minute. An agent of another build or protocol is refused
// with a message that names both builds. [Dial] connects to a pool as an
// agent does, for tools that look into a live pool.
//
// What the agent's workers print (their jobs' output, their own
// messages) goes to the pool, which writes it to its engine.WorkerOutput
// writers as a local worker's: in whole lines, standard output and error
// apart, an unfinished last line as it is when the worker ends. The
// agent's stderr holds only what the agent says. An agent sends at most
// 1 MiB of a worker's output beyond what the pool has written; a job that
// prints faster than the pool's writers take it waits in its write, as
// over a pipe, and the pool holds at most that much of each worker's
// output. A worker goroutine ([InProcess]) prints so through
// engine.JobOutput.
//
// The agent replaces a worker process that dies while the pool runs (the
// pool Aborts its running job, or runs it again with retries, as for a
// local worker); a worker that the pool kills (its job past its timeout, a
// cancel not heeded, a worker silent) is killed by the agent, with what
// its job started, and replaced. Asked to stop (poolrun worker: SIGTERM,
// Ctrl-C), the agent has its workers leave cleanly: each starts no other
// job, its running job's context is cancelled (a job that then returns an
// error is Aborted), its cache's cleanups run, and it says goodbye, so
// that the pool gives the jobs it had been sent to other workers at once.
// The agent's workers die with its process (a parent-death signal), and
// kill their jobs' commands as they go. An agent whose connection, or
// whose stream from the pool, ends without the pool's word that it ended
// (the pool killed, its host cut off) kills its workers' commands and
// ends with an error that says it lost the pool (poolrun worker: exit
// status 1).
//
// # On the wire
//
// A host agent of id AGENT (a plain token; a join request with any other
// id is refused) has two subjects: poolrun.a.AGENT.down, from the pool,
// and poolrun.a.AGENT.up, to it; join requests go to poolrun.join. Each
// carries a byte stream of records: a record names one of the agent's
// workers by a slot number and carries a piece of one of the pipe
// protocol's streams (its jobs, its control, its replies), its window's
// set, its start or its end, what it printed and the pool's grants of
// output credit; pings belong to the host. A stream is cut
// into NATS messages of at most 1 MiB, each with its sequence number, with
// flow control (see Limits); a missing message ends the stream, and the
// host is lost, as a worker whose pipe broke. These are plain NATS subjects, not a JetStream work
// queue: the pool schedules, and a job that started is never run again
// behind the user's back.
//
// Batching: each stream has one sender, and what is put while it sends
// (the jobs of a dispatch round to the host's workers, the windows that
// the round published, cancels; on the way back, the replies of the
// host's workers) waits and goes in its next message. Messages grow with
// hosts and rounds, not with workers or jobs.
//
// # Liveness and fencing
//
// An agent pings the pool every 500 ms, each ping saying when it was
// sent, and the pool echoes each one while it counts the host as its
// own. The pool gives up a host when its agent's connection to the
// server closes (an agent killed, a host down: within half a second), or
// when it has heard nothing from it for 10 s of the time the pool's
// process ran. A pool stopped with Ctrl-Z, then continued, keeps its
// hosts. The running jobs of a host given up are Aborted with
// engine.ErrWorkerDied, or run again where retries were asked for. Its
// agent is told, if it can still hear: it kills its workers and their
// jobs' commands and ends with an error.
//
// Fencing: nothing of a job runs on beside its retry. The agent holds a
// lease that lasts 5 s (half the silence limit) from the sending of the
// latest ping that the pool echoed; the pool read that ping later, and
// gives the host up no sooner than 10 s after it. When the lease ends
// (the pool stopped, the network down), the agent stops its workers,
// their process groups and the commands of their jobs (SIGSTOP; a
// command is found by its owner mark, see internal/spawn), and continues
// them only once an echo renews the lease: what the pool sent before it
// gave the host up, which a network that heals delivers late, renews
// nothing. Each worker process holds the lease too (its agent hands it
// on), and stops its commands itself when it ends: an agent stopped
// (SIGSTOP) or hung renews nothing. When a worker process dies, its agent
// kills its commands before it tells the pool.
//
// A worker's replies go through its pipe, which outlives it, to the
// agent, which sends them on before the worker's end: a job that returned
// is not blamed for its worker's death that followed. A result that comes
// from a worker the pool has left (killed, or given up with its host) is
// dropped: it belongs to an attempt that has been superseded.
//
// Caveats. What is fenced is a job's commands (and, while the agent
// runs, its worker processes): the Go code of a job in a worker whose
// agent is stopped goes on, and a process that drops its owner mark and
// leaves its command's process group escapes. The margin of the lease
// (5 s) must cover a ping's way to the pool and the time the host takes
// to stop its commands. A host whose connection closes is given up at
// once, not when its lease ends: when an agent is killed, its workers
// kill their commands as soon as their lease pipe ends, in a race with
// the pool's retry.
//
// # The window
//
// A worker's window is shared memory on its host, written by its agent
// (hostwindow.go). The pool publishes each worker's set as a record of the
// host's down stream, before the jobs of the same round, without waiting
// for the network: a change of the pool's sets costs one message per
// host, whatever the number of its workers. Before it evicts for a job
// stamped with generation g, a worker waits until its window has g, up to
// a second; if it still has not, it evicts nothing, runs the job, and
// says so on its standard error: a window written late costs memory,
// never a wrong eviction. A worker never evicts by a set older than its
// job's.
//
// # Limits
//
// Values: a job's argument and its result cross whatever their size up to
// the pool's engine.MaxValueSize (64 MiB by default, up to 1023 MiB); a
// larger value fails its job with an error wrapping engine.ErrTooLarge
// that gives both sizes, and the pool goes on. The pool's process holds
// such a value about four times while its job runs (see
// engine.MaxValueSize), not more for crossing hosts: a frame comes in as
// it arrives, never whole in the server or the client at once.
//
// A frame larger than 1 MiB travels in messages of 1 MiB (the server
// allows 8 MiB), with flow control: the reader of a stream says how far it
// has read, on the stream's subject with ".ack" added, and its writer
// sends at most 8 MiB (the window) beyond that, and waits. The server and
// the reader's client so hold at most a window of each stream, whatever
// the size of the value: a worker that reads slowly slows the pool's
// writing rather than being dropped, and so does a pool that reads a
// worker's reply slowly; the server holds up to 1 GiB for one connection
// (the windows of 128 streams: the pool's connection carries every
// host's streams) before it closes it. A writer
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
// that moves a large value holds several times its size (bench/README.md
// gives the figure at 512 MiB): budget memory for it, on the pool's host
// and the worker's. TestLargeValueRemote moves 128 MiB each way, or
// POOLRUN_TEST_LARGE_MIB.
//
// # Scale
//
// What a pool of many remote workers costs the pool's process: per host,
// two streams (each a subject and its acks' and probes' subjects) and a
// few goroutines on the pool's one connection; per worker, a place in the
// scheduler and a slot in its host's records. The pool's one dispatch
// loop sends every job and takes every reply, so short jobs on many
// workers wait for the pool; its cost per job stays flat as hosts and
// workers are added (the scheduler keeps its sets of places as they
// change, and the hosts' streams batch). The figures (no-op jobs/s from 2
// to 1,000 workers, the pool's CPU per job and memory per worker, the
// time for a change of the window to reach the workers) are in
// bench/README.md, with their commands.
package cluster
