// Package clusterbench holds the benchmarks of one pool across hosts, on
// loopback (bench/README.md, section 9): BenchmarkClusterDispatch and
// BenchmarkClusterWorkers. They live apart from package bench so that the
// worker processes of bench's other benchmarks, which are bench's test
// binary, do not link the NATS server: a user's program that does not
// import cluster does not either.
package clusterbench
