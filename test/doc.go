// Package test holds poolrun's integration tests, which start real worker
// processes. It has no code of its own.
package test
