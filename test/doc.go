// Package test holds poolrun's integration tests, which start real worker
// processes. It has no code of its own.
//
// The tests that make sense whatever carries the jobs run over three
// transports (see transport_test.go): local worker processes on pipes with
// the shared-memory window, serial mode in the test's own process, and
// the cluster, where three processes of the test binary join the pool's
// embedded NATS server over loopback with its join file, as workers on
// other hosts do.
package test
