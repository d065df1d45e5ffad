// Package test holds poolrun's integration tests: they start real worker
// processes (the test binary re-executes itself; TestMain calls
// engine.Init first) and check the pool from the outside.
package test

import (
	"os"
	"testing"

	"github.com/poolrun/poolrun/engine"
)

func TestMain(m *testing.M) {
	engine.Init()
	os.Exit(m.Run())
}
