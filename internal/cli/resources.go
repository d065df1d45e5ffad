package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/human"
	"github.com/poolrun/poolrun/internal/workflow"
	"github.com/spf13/pflag"
)

// resourceFlags are poolrun run's flags for the jobs' retries and
// resources: --mem, --resources (and --retries, a pool flag, whose
// meaning run widens to failed commands).
type resourceFlags struct {
	mem   memSize
	named namedLimits
}

// retriesUsage is --retries' usage under poolrun run, where it retries
// failed commands too.
const retriesUsage = "run a job again, up to `N` more times (0 to %d), when its command fails (exits non-zero, or passes its timeout) or its worker dies; a job's retries: wins"

func (f *resourceFlags) register(fs *pflag.FlagSet) {
	fs.Var(&f.mem, "mem", "run at once only the jobs whose mem: fields sum to at most `SIZE` (512M, 2G, 1.5GiB: powers of 1024; 0: no limit); a job that asks for more runs alone")
	fs.Var(&f.named, "resources", "run at once only the jobs whose resources: take at most `NAME=N` of the resource NAME (gpu=2,licence=1; repeatable; wins over the workflow's resources:); a resource with a limit nowhere has none")
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
// their threads: against slots (-j as given; 0: no bound), their mem:
// against --mem and their resources: against the limits of --resources
// and of the workflow's resources: (engine.Capacity); none when no such
// job declares one that is bounded, so that a workflow without them runs
// as before (workers may be sent a short job ahead of the one they run).
// A resource with a limit nowhere is not counted (Snakemake's rule). It
// warns, on stderr, of each job that asks for more than the pool has: it
// runs alone. With --listen (listen) it returns none, and says so once if
// a job declares any: they bound one host, and the jobs run on several.
func (f *resourceFlags) capacity(wf *workflow.Workflow, plan *execflow.Plan, slots int, listen bool, stderr io.Writer) []engine.Option {
	c := engine.Resources{Slots: slots, Memory: int64(f.mem), Named: f.limits(wf)}
	declared := false
	for _, j := range wf.Jobs {
		if plan != nil && !plan.Runs(j.ID) || j.Threads <= 1 && j.Mem == 0 && !bounded(j, c.Named) {
			continue
		}
		if listen {
			fmt.Fprintf(stderr, "poolrun run: threads:, mem: and resources: are not counted with --listen (they bound one host; the jobs run on several): %s:%d: job %q\n", wf.File, j.Line, j.ID)
			return nil
		}
		declared = true
		switch {
		case c.Slots > 0 && j.Threads > c.Slots:
			fmt.Fprintf(stderr, "poolrun run: %s:%d: job %q has threads: %d, more than -j %d: it runs alone\n", wf.File, j.Line, j.ID, j.Threads, c.Slots)
		case c.Memory > 0 && j.Mem > c.Memory:
			fmt.Fprintf(stderr, "poolrun run: %s:%d: job %q has mem: %s, more than --mem %s: it runs alone\n", wf.File, j.Line, j.ID, human.Bytes(j.Mem), human.Bytes(c.Memory))
		default:
			for _, name := range slices.Sorted(maps.Keys(j.Resources)) {
				if limit, ok := c.Named[name]; ok && j.Resources[name] > limit {
					fmt.Fprintf(stderr, "poolrun run: %s:%d: job %q has resources: %s: %d, more than the limit %d (%s): it runs alone\n", wf.File, j.Line, j.ID, name, j.Resources[name], limit, f.limitSource(name))
					break
				}
			}
		}
	}
	if !declared || c.Slots == 0 && c.Memory == 0 && len(c.Named) == 0 {
		return nil
	}
	return []engine.Option{engine.Capacity(c)}
}

// limits returns the limits of the named resources: the workflow's
// resources:, and --resources over them, name by name; nil if none.
func (f *resourceFlags) limits(wf *workflow.Workflow) map[string]int64 {
	if len(wf.Resources) == 0 && len(f.named) == 0 {
		return nil
	}
	l := make(map[string]int64, len(wf.Resources)+len(f.named))
	maps.Copy(l, wf.Resources)
	maps.Copy(l, f.named) // the flag wins
	return l
}

// limitSource says where the limit of the resource name comes from.
func (f *resourceFlags) limitSource(name string) string {
	if _, ok := f.named[name]; ok {
		return "--resources"
	}
	return "the workflow's resources:"
}

// bounded reports whether j takes some of a resource that limits bounds.
func bounded(j *workflow.Job, limits map[string]int64) bool {
	for name, n := range j.Resources {
		if _, ok := limits[name]; ok && n > 0 {
			return true
		}
	}
	return false
}

// namedLimits is --resources: NAME=N limits, from a comma list and from
// every time the flag is given; a name may be given once.
type namedLimits map[string]int64

func (l *namedLimits) String() string {
	parts := make([]string, 0, len(*l))
	for _, name := range slices.Sorted(maps.Keys(*l)) {
		parts = append(parts, name+"="+strconv.FormatInt((*l)[name], 10))
	}
	return strings.Join(parts, ",")
}

func (l *namedLimits) Type() string { return "NAME=N,..." }

func (l *namedLimits) Set(s string) error {
	for kv := range strings.SplitSeq(s, ",") {
		name, amount, ok := strings.Cut(strings.TrimSpace(kv), "=")
		switch {
		case name == "threads" || name == "mem":
			return fmt.Errorf("%s is not a named resource: its limit is %s", name, map[string]string{"threads": "-j", "mem": "--mem"}[name])
		case !workflow.ResourceName(name):
			return fmt.Errorf("%q is not a resource name (a letter or _, then letters, digits or _): want NAME=N", name)
		case !ok:
			return fmt.Errorf("want %s=N, a whole number 0 or more", name)
		}
		n, err := strconv.ParseInt(amount, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("%s: want a whole number, 0 or more", amount)
		}
		if _, again := (*l)[name]; again {
			return fmt.Errorf("%s given twice", name)
		}
		if *l == nil {
			*l = namedLimits{}
		}
		(*l)[name] = n
	}
	return nil
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
