// Package bench holds poolrun's benchmarks that compare designs and
// eviction policies side by side. It has no code of its own: everything is
// in its _test.go files, run with
//
//	go test -run '^$' -bench . -benchmem ./bench/
//
// The groups, each reporting its figures with testing.B.ReportMetric so
// that benchstat can compare runs:
//
//   - BenchmarkPolicies: the engine's eviction policies (engine.EvictStale,
//     engine.EvictNever, engine.EvictEachJob) on the scaffold workload and on
//     a phased pipeline, two workers: wall time, builds, hits, evictions,
//     peak and mean cache bytes.
//   - BenchmarkRequiredSetTransport: the shared window against sending the
//     whole required set inside every job message (an alternative design
//     written only here), for 10, 100 and 1000 required keys and 1 to 8
//     workers: cost and bytes per dispatch.
//   - BenchmarkDispatch: no-op jobs, and jobs that only get a resident
//     item, through the pool: jobs/s.
//   - BenchmarkSnapshot: a worker's copy of the window, with the writer
//     idle and with a writer publishing in another process.
//   - BenchmarkHold: the ways of holding items (plain, per-worker eviction,
//     affinity, idle eviction, all of them, never, each-job, a budget) on
//     the scaffold, the cerebellum example and a phased workload, at 2 and
//     4 workers: builds, the peak of the summed cache, stale byte-seconds.
//   - BenchmarkCodec: a job argument of the shape of poolrun run's,
//     encoded with gob or with its own MarshalBinary: jobs/s.
//   - BenchmarkVersusMake and BenchmarkForkWait: poolrun run -j 2 against
//     make -j2 on 1,000 jobs of true, and what a Go process pays to wait
//     for its children; skipped where make is not installed.
//
// The benchmarks of the pool across hosts are in bench/cluster, apart, so
// that this package's worker processes link no NATS server, as a user's
// program that does not import cluster: BenchmarkClusterDispatch and
// BenchmarkClusterWorkers, no-op jobs on remote workers behind host agents
// that join over loopback, against local workers over pipes in the same
// op, and with 2 to 1,000 remote worker processes. The window's latency
// through the agents is BenchmarkAgentWindowSeen in package cluster.
//
// The maintenance of the required set (the engine's per-key reference
// counts against rescanning every job on each completion) needs the
// engine's internals and is measured in package engine:
// BenchmarkRequiredSet in engine/bench_internal_test.go. README.md beside
// this file has the current figures of every group, each with the command
// that prints it.
//
// The test binary starts worker processes (it is its own worker: TestMain
// calls engine.Init first), for BenchmarkSnapshot a publisher process, and
// for the cluster benchmarks host agents (cluster.Agent).
package bench
