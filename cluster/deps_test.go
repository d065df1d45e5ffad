package cluster_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestEngineAloneLinksNoNATS: a program that imports package engine alone
// does not link the NATS server or client; the cluster package does.
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
	found := false
	for _, d := range deps("github.com/poolrun/poolrun/cluster") {
		found = found || strings.HasPrefix(d, "github.com/nats-io/nats-server/")
	}
	if !found {
		t.Error("package cluster does not link the NATS server: the check above proves nothing")
	}
}
