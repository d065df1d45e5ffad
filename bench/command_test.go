package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// builtPoolrun is the poolrun command built from this tree, once per
// process, for the benchmarks that time its start (see poolrunCommand).
var builtPoolrun struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// poolrunCommand returns a command of poolrun with args. At full size it
// is the poolrun command as a user installs it (built from this tree with
// go build, once per process): a benchmark of its start must not time the
// test binary, which links every package the benchmarks use. Under -short
// (CI's smoke run, no build) the test binary plays it (rolePoolrun).
func poolrunCommand(b *testing.B, args ...string) *exec.Cmd {
	b.Helper()
	if testing.Short() {
		c := exec.Command(os.Args[0], args...)
		c.Env = append(os.Environ(), envRole+"=poolrun")
		return c
	}
	p := &builtPoolrun
	p.once.Do(func() {
		if p.dir, p.err = os.MkdirTemp("", "poolrun-bench-"); p.err != nil {
			return
		}
		p.path = filepath.Join(p.dir, "poolrun")
		build := exec.Command("go", "build", "-o", p.path, "github.com/poolrun/poolrun/cmd/poolrun")
		build.Stderr = os.Stderr
		p.err = build.Run()
	})
	if p.err != nil {
		b.Fatalf("building poolrun: %v", p.err)
	}
	return exec.Command(p.path, args...)
}
