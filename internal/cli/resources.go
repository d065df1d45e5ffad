package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/workflow"
	"github.com/spf13/pflag"
)

// resourceFlags are poolrun run's flags for the jobs' retries and
// resources: --mem (and --retries, a pool flag, whose meaning run
// widens to failed commands).
type resourceFlags struct {
	mem memSize
}

// retriesUsage is --retries' usage under poolrun run, where it retries
// failed commands too.
const retriesUsage = "run a job again, up to `N` more times (0 to %d), when its command fails (exits non-zero, or passes its timeout) or its worker dies; a job's retries: wins"

func (f *resourceFlags) register(fs *pflag.FlagSet) {
	fs.Var(&f.mem, "mem", "run at once only the jobs whose mem: fields sum to at most `SIZE` (512M, 2G, 1.5GiB: powers of 1024; 0: no limit); a job that asks for more runs alone")
	if r := fs.Lookup("retries"); r != nil {
		r.Usage = fmt.Sprintf(retriesUsage, maxRetries)
	}
}

// memSize is --mem: a size as workflow.ParseSize reads mem: fields.
type memSize int64

func (m *memSize) String() string { return strconv.FormatInt(int64(*m), 10) }

func (m *memSize) Type() string { return "size" }

func (m *memSize) Set(s string) error {
	n, err := workflow.ParseSize(s)
	if err != nil {
		return err
	}
	*m = memSize(n)
	return nil
}

// capacity returns the pool options that make the jobs that run count
// their threads: against slots (-j as given; 0: no bound) and their mem:
// against --mem (engine.Capacity); none when no such job declares
// either, so that a workflow without them runs as before (workers may be
// sent a short job ahead of the one they run). It warns, on stderr, of
// each job that asks for more than the pool has: it runs alone. With
// --listen (listen) it returns none, and says so once if a job declares
// threads or mem: they bound one host, and the jobs run on several.
func (f *resourceFlags) capacity(wf *workflow.Workflow, plan *execflow.Plan, slots int, listen bool, stderr io.Writer) []engine.Option {
	c := engine.Resources{Slots: slots, Memory: int64(f.mem)}
	declared := false
	for _, j := range wf.Jobs {
		if plan != nil && !plan.Runs(j.ID) || j.Threads <= 1 && j.Mem == 0 {
			continue
		}
		if listen {
			fmt.Fprintf(stderr, "poolrun run: threads: and mem: are not counted with --listen (they bound one host; the jobs run on several): %s:%d: job %q\n", wf.File, j.Line, j.ID)
			return nil
		}
		declared = true
		switch {
		case c.Slots > 0 && j.Threads > c.Slots:
			fmt.Fprintf(stderr, "poolrun run: %s:%d: job %q has threads: %d, more than -j %d: it runs alone\n", wf.File, j.Line, j.ID, j.Threads, c.Slots)
		case c.Memory > 0 && j.Mem > c.Memory:
			fmt.Fprintf(stderr, "poolrun run: %s:%d: job %q has mem: %s, more than --mem %s: it runs alone\n", wf.File, j.Line, j.ID, humanBytes(j.Mem), humanBytes(c.Memory))
		}
	}
	if !declared || c.Slots == 0 && c.Memory == 0 {
		return nil
	}
	return []engine.Option{engine.Capacity(c)}
}

// withAttempts says in msg, a failed job's message that begins with
// head, that it failed after n attempts, when it ran more than once:
// job "ID" (FILE:LINE): failed after 3 attempts: exit status 1.
func withAttempts(msg, head string, n int) string {
	if n < 2 {
		return msg
	}
	what := fmt.Sprintf("failed after %d attempts", n)
	if rest, ok := strings.CutPrefix(msg, head); ok {
		return head + what + ": " + rest
	}
	first, more, _ := strings.Cut(msg, "\n")
	return strings.TrimRight(first+" ("+what+")\n"+more, "\n")
}

// runFailed reports whether err, that of a run that is retried, is the
// run's own failure (an error the job returned, its panic, its timeout)
// rather than its worker's death.
func runFailed(err error) bool {
	var re *engine.RemoteError
	var te *engine.TimeoutError
	var pe *engine.PanicError
	return errors.As(err, &re) || errors.As(err, &te) || errors.As(err, &pe)
}
