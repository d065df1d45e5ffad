package cluster_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestEngineAloneLinksNoNATS: a program that imports package engine alone
// does not link the NATS server or client; the poolrun command links the
// client and not the server, which package hub (and poolrun-hub) links.
func TestEngineAloneLinksNoNATS(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	deps := func(pkg string) []string {
		out, err := exec.Command(goTool, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	for _, d := range deps("github.com/poolrun/poolrun/engine") {
		if strings.Contains(d, "nats-io") {
			t.Errorf("package engine depends on %s", d)
		}
	}
	links := func(pkg, dep string) bool {
		for _, d := range deps(pkg) {
			if strings.HasPrefix(d, dep) {
				return true
			}
		}
		return false
	}
	const server, client = "github.com/nats-io/nats-server/", "github.com/nats-io/nats.go"
	if !links("github.com/poolrun/poolrun/cmd/poolrun", client) {
		t.Error("the poolrun command does not link the NATS client: it cannot join a pool")
	}
	if links("github.com/poolrun/poolrun/cmd/poolrun", server) {
		t.Error("the poolrun command links the NATS server, which belongs to poolrun-hub")
	}
	if !links("github.com/poolrun/poolrun/cmd/poolrun-hub", server) {
		t.Error("poolrun-hub does not link the NATS server: the check above proves nothing")
	}
}
