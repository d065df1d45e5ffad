package execflow_test

import (
	"context"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/proctest"
)

// TestDescriptorsClosed runs commands on in-process workers: one that
// succeeds, one that fails, one whose plain word cannot be started (it
// goes to the shell, which says 127) and one cancelled by its timeout. No
// descriptor (a pipe, a pidfd) is left open after the pool.
func TestDescriptorsClosed(t *testing.T) {
	wf := parse(t, "pidfd.yaml", `
jobs:
  - id: ok
    run: "true"
  - id: fails
    run: "false"
  - id: missing
    run: no-such-program-poolrun-test
  - id: slow
    run: sleep 30
    timeout: 100ms
`)
	// count returns the number of open descriptors, without epoll
	// instances (the runtime poller's), and the number of pidfds among
	// them.
	count := func() (n, pidfds int) {
		open, err := proctest.FDs()
		if err != nil {
			t.Skip("no /proc/self/fd:", err)
		}
		for _, l := range open {
			if l == "anon_inode:[eventpoll]" {
				continue
			}
			n++
			// "anon_inode:[pidfd]"; "pidfd:[N]" where pidfs serves them
			// (Linux 6.9 and later).
			if strings.Contains(l, "pidfd") {
				pidfds++
			}
		}
		return n, pidfds
	}
	before, _ := count()
	for range 3 {
		p := engine.New(engine.InProcess(2))
		if _, err := execflow.Queue(p, wf, execflow.Options{Dir: t.TempDir(), Scratch: t.TempDir()}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		p.Run(ctx)
		cancel()
	}
	// The runtime's own descriptors may come and go; a descriptor per
	// command would leave twelve.
	after, pidfds := count()
	if pidfds > 0 {
		t.Errorf("%d pidfds open after the pools", pidfds)
	}
	if after > before+2 {
		t.Errorf("%d descriptors open before the pools, %d after (epoll instances not counted)", before, after)
	}
}
