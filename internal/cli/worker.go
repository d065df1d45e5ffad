package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"

	"github.com/poolrun/poolrun/cluster"
	"github.com/poolrun/poolrun/internal/regfile"
)

const workerUsage = `Usage: poolrun worker --join-file FILE [-j N]

Joins the pool whose join file is FILE, on this host or another, with N
worker processes (default: this host's CPUs) behind one agent, and serves
it until it ends. The pool was started with --listen ADDR --join-file FILE
("poolrun run" or "poolrun scaffold").
`

const workerDetails = `The join file (JSON, mode 0600) holds what a worker needs to join: the
pool's address, its credential (a random token), the fingerprint of the
pool's build, what TLS needs off loopback (the certificate of the
authority made for the pool, or those of the pool's --tls-cert, which the
worker trusts and nothing else), and the pool's output folders. Copy it
to this host and keep it readable by its owner only (chmod 600): whoever
can read it can join the pool and run jobs as you, and a join file that
group or others can read is refused. The worker must be the same poolrun
as the pool's: another build is refused, with both builds named.

Output folders (--out of scaffold; for run, the workflow file's folder and
the working folder) must be on storage that this host sees, at the same
path: before joining, the worker creates and removes a file of its own in
each, and refuses (exit status 1, naming the folder and this host) where
it cannot. Items are built in each worker's scratch folder on this host.

This process is the host's agent: it holds the one connection to the
pool, starts the N worker processes, relays their jobs and replies, and
writes each worker's window (which items it must keep) in shared memory,
which the workers read without asking, as on the pool's host.

What the jobs print goes to the pool, which shows it as a local job's
output (on its standard output and error, tagged with its --tag, or in
its --log-dir, which the workers write themselves and must see at the
same path); this process prints only what the agent does: a worker
replaced, the pool silent or lost, errors. A job that prints faster than
the pool's terminal takes it waits, as over a pipe. A worker
process that dies is replaced while the pool runs (its running job is
Aborted, or run again with --retries); when five in a row die within 10 s
of their start, the agent gives up (exit status 1). Run one agent per
host: srun --ntasks-per-node=1 poolrun worker --join-file FILE uses every
core of each node.

The agent pings the pool every half second, and the pool echoes each
ping. If the agent has had no echo of a ping sent in the last 5 s (the
pool stopped, or the network down), it stops its workers and their
commands (SIGSTOP) until an echo of a newer ping comes; a stopped agent's
workers stop their commands themselves. A pool that hears nothing from
the agent for 10 s gives its jobs to other workers and tells it, and the
agent then kills its workers and their commands and exits with status 1,
saying why. When a worker process dies, the agent kills what its commands
left running before the pool runs the job again. The agent's workers and
their commands die with it (SIGKILL included).

SIGTERM or Ctrl-C (as Slurm stops a job step) makes the workers leave the
pool cleanly: each starts no other job, the job it runs is cancelled (the
pool counts it Aborted, and runs it again elsewhere with --retries), its
items' cleanups run, the jobs it had been sent go to other workers, and
poolrun worker exits with status 0. An agent whose pool is gone without
saying that it ended (killed, or cut off) kills its workers' commands and
exits with status 1 within 5 s, saying that it lost the pool.

Example, with the pool on host a and more workers on host b:
  a$ poolrun scaffold --listen 0.0.0.0:4222 --join-file run.join -j 2
  a$ scp run.join b:
  b$ poolrun worker --join-file run.join -j 4
`

// runWorker is "poolrun worker".
func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("worker", workerUsage, workerDetails)
	joinFile := fs.String("join-file", "", "the pool's join `FILE`")
	n := fs.IntP("jobs", "j", runtime.NumCPU(), fmt.Sprintf("run `N` worker processes, 1 to %d", maxWorkers))
	if err := parseFlags(fs, args, stdout); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fs, fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	}
	if *joinFile == "" {
		return usageError(fs, "--join-file: give the pool's join file")
	}
	if *n < 1 || *n > maxWorkers {
		return badInputf("poolrun worker: -j %d: want a number of workers from 1 to %d", *n, maxWorkers)
	}
	j, err := cluster.ReadJoinFile(*joinFile)
	if err != nil {
		return badInput(fmt.Errorf("poolrun worker: --join-file %s: %w", *joinFile, err))
	}
	// Once, before any worker starts (each checks again as it joins).
	if err := j.CheckOutputs(); err != nil {
		return fmt.Errorf("poolrun worker: not joining: %w", err)
	}
	return cluster.Agent(ctx, *joinFile, *n, stderr)
}

// checkListen checks --listen and --join-file: both or neither, and an
// address HOST:PORT. Off loopback the pool's server speaks TLS, with
// certificates of its own or those of --tls-cert (see package cluster).
func checkListen(listen, joinFile string) error {
	if (listen == "") != (joinFile == "") {
		return badInputf("poolrun: --listen and --join-file go together")
	}
	if listen == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(listen); err != nil {
		return badInputf("poolrun: --listen %s: want HOST:PORT, such as 127.0.0.1:4222 or 0.0.0.0:4222", listen)
	}
	return nil
}

// checkTLSFlags checks --tls-cert and --tls-key: both or neither, with
// --listen, and regular files that can be read (package cluster checks
// what they hold when the server starts).
func checkTLSFlags(listen, cert, key string) error {
	if cert == "" && key == "" {
		return nil
	}
	switch {
	case listen == "":
		return badInputf("poolrun: --tls-cert and --tls-key are for the server of --listen: give --listen too")
	case cert == "":
		return badInputf("poolrun: --tls-key %s: give its certificate with --tls-cert", key)
	case key == "":
		return badInputf("poolrun: --tls-cert %s: give its private key with --tls-key", cert)
	}
	for _, f := range [][2]string{{"--tls-cert", cert}, {"--tls-key", key}} {
		// A FIFO or a device is refused at once: package cluster reads
		// these with os.ReadFile, which would wait for a FIFO's writer.
		fh, err := regfile.Open(f[1])
		if err != nil {
			return badInputf("poolrun: %s: %v", f[0], err)
		}
		fh.Close()
	}
	return nil
}
