//go:build linux

package prestart_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/poolrun/poolrun/internal/prestart"
)

// roleEnv makes the test binary, re-executed by a test, say what its main
// found instead of running the tests: whether it was reached at all, its
// timer slack and the marker of a raised one.
const roleEnv = "PRESTART_TEST_ROLE"

func TestMain(m *testing.M) {
	if _, ok := os.LookupEnv(roleEnv); ok {
		slack, _ := os.ReadFile("/proc/self/timerslack_ns")
		marker, _ := os.LookupEnv(prestart.SlackEnv)
		fmt.Printf("main reached: slack %s marker %q\n", strings.TrimSpace(string(slack)), marker)
		os.Exit(3)
	}
	os.Exit(m.Run())
}

func slackOf(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skip("no timer slack in /proc here:", err)
	}
	return strings.TrimSpace(string(b))
}

// TestCoalesceWakeups: "run FILE" with many "run:" in FILE starts the
// program again, before main, with the timer slack raised and the slack
// it had in the marker; with few, a state file beside FILE, FILE not a
// regular file, or a dry run, graph or help asked for, main is reached in
// the first start, with its slack.
func TestCoalesceWakeups(t *testing.T) {
	own := slackOf(t, "/proc/self/timerslack_ns")
	dir := t.TempDir()
	write := func(name string, jobs int) string {
		var b strings.Builder
		b.WriteString("jobs:\n")
		for i := range jobs {
			fmt.Fprintf(&b, "  - {id: j%d, run: \"true\"}\n", i)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	many := write("many.yaml", prestart.ManyCommands)
	few := write("few.yaml", prestart.ManyCommands-1)
	stated := write("stated.yaml", 300)
	if err := os.WriteFile(filepath.Join(dir, ".stated.yaml"+prestart.StateSuffix), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "wf.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	raised := fmt.Sprintf("main reached: slack %d marker %q\n", prestart.TimerSlack, own)
	kept := fmt.Sprintf("main reached: slack %s marker \"\"\n", own)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"many", []string{"run", many}, raised},
		{"many with flags", []string{"run", "-j", "2", "--quiet", "--log-dir", "logs", many}, raised},
		{"relative path", []string{"run", "many.yaml"}, raised},
		{"few", []string{"run", few}, kept},
		{"state file", []string{"run", stated}, kept},
		{"not a regular file", []string{"run", fifo}, kept},
		{"no such file", []string{"run", filepath.Join(dir, "none.yaml")}, kept},
		{"dry run", []string{"run", "-n", many}, kept},
		{"dry run, long", []string{"run", "--dry-run=true", many}, kept},
		{"graph", []string{"run", "--dag", many}, kept},
		{"help", []string{"run", "-h", many}, kept},
		{"flags after --", []string{"run", "--", many}, kept},
		{"last argument a flag", []string{"run", many, "-j"}, kept},
		{"another command", []string{"scaffold", many}, kept},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], c.args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), roleEnv+"=1")
			out, _ := cmd.CombinedOutput()
			if string(out) != c.want {
				t.Errorf("%v: got %q, want %q", c.args, out, c.want)
			}
		})
	}
}
