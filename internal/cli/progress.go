package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/human"
	"github.com/poolrun/poolrun/internal/report"
)

// progress shows a pool's progress on standard error: a live bar on a
// terminal, a plain line every few seconds otherwise.
type progress struct {
	w     io.Writer
	start time.Time
	// slots is how many jobs can run at once (the workers, 1 serially):
	// the pool sends short jobs to a worker ahead of the one it runs, and
	// counts them running, but they wait there.
	slots int

	mu   sync.Mutex
	last engine.Event // the latest event, with its counts

	// stats, for a pool that workers join from elsewhere (nil otherwise):
	// the status then counts the live workers by host, at most every
	// hostsEvery (live of them, said in hosts, at hostsAt).
	stats   func() engine.Stats
	live    int
	hosts   string
	hostsAt time.Time

	// terminal
	bars *mpb.Progress
	bar  *mpb.Bar

	// plain
	stopPlain chan struct{}
	plainDone chan struct{}
}

// plainEvery is how often progress is printed off a terminal.
const plainEvery = 2 * time.Second

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && terminal(f)
}

// sameFile reports whether a and b are the same open file (a terminal,
// say).
func sameFile(a, b io.Writer) bool {
	fa, ok := a.(*os.File)
	if !ok {
		return false
	}
	fb, ok := b.(*os.File)
	if !ok {
		return false
	}
	sa, err := fa.Stat()
	if err != nil {
		return false
	}
	sb, err := fb.Stat()
	return err == nil && os.SameFile(sa, sb)
}

// newProgress starts the display of a pool that can run slots jobs at once;
// stats, if not nil, gives the pool's figures, and the status then counts
// its workers by host.
func newProgress(ctx context.Context, w io.Writer, slots int, stats func() engine.Stats) *progress {
	p := &progress{w: w, start: time.Now(), slots: max(slots, 1), stats: stats}
	if isTerminal(w) {
		// The bar stays until stop, not until ctx ends: what is printed
		// above it while the pool stops after an interrupt is shown, not
		// lost with the bar.
		ctx = context.WithoutCancel(ctx)
		p.bars = mpb.NewWithContext(ctx, mpb.WithOutput(w), mpb.WithWidth(32), mpb.WithRefreshRate(120*time.Millisecond))
		p.bar = p.bars.AddBar(0,
			mpb.PrependDecorators(
				decor.Name("jobs ", decor.WCSyncSpaceR),
				decor.CountersNoUnit("%d/%d", decor.WCSyncWidth),
			),
			mpb.AppendDecorators(
				decor.Any(func(decor.Statistics) string { return p.status() }),
			),
		)
		return p
	}
	p.stopPlain = make(chan struct{})
	p.plainDone = make(chan struct{})
	go func() {
		defer close(p.plainDone)
		t := time.NewTicker(plainEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				fmt.Fprintf(w, "poolrun: %s\n", p.line())
			case <-p.stopPlain:
				return
			}
		}
	}()
	return p
}

func (p *progress) update(e engine.Event) {
	p.mu.Lock()
	p.last = e
	p.mu.Unlock()
	if p.bar != nil {
		done := e.Counts[engine.Succeeded] + e.Counts[engine.Failed] + e.Counts[engine.Cancelled] + e.Counts[engine.Aborted] + e.Counts[engine.Skipped]
		p.bar.SetTotal(int64(e.Total()), false)
		p.bar.SetCurrent(int64(done))
	}
}

// printf prints a line: above the bar on a terminal (which redraws
// below it), else at once.
func (p *progress) printf(format string, args ...any) {
	p.Write(fmt.Appendf(nil, format, args...))
}

// Write prints b, which should be whole lines: above the bar on a
// terminal, at its next refresh (with a newline added at the end if b
// has none, since the bar is drawn on the line after), else at once. Once
// the bar has stopped, it prints at once. It is safe for concurrent use.
func (p *progress) Write(b []byte) (int, error) {
	if p.bars != nil {
		line := b
		if len(b) > 0 && b[len(b)-1] != '\n' {
			line = append(line[:len(line):len(line)], '\n')
		}
		if _, err := p.bars.Write(line); !errors.As(err, new(mpb.ErrDone[*mpb.Progress])) {
			return len(b), err
		}
	}
	return p.w.Write(b)
}

// status is the text after the bar.
func (p *progress) status() string {
	p.mu.Lock()
	e := p.last
	p.mu.Unlock()
	c := e.Counts
	slots, workers := p.slots, ""
	if p.stats != nil {
		slots, workers = p.workers()
	}
	s := fmt.Sprintf("running %d  failed %d  cache %s  %s", min(c[engine.Running], slots), c[engine.Failed]+c[engine.Aborted], human.Bytes(e.CacheBytes), time.Since(p.start).Round(time.Second))
	if n := c[engine.Cancelled]; n > 0 {
		s += fmt.Sprintf("  cancelled %d", n)
	}
	if workers != "" {
		s += "  " + workers
	}
	return s
}

// hostsEvery is how often the status counts the workers again.
const hostsEvery = time.Second

// workers returns how many workers the pool has, and says it with their
// hosts, as "workers 5 (a 2, b 3)", by host name.
func (p *progress) workers() (int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hostsAt.IsZero() || time.Since(p.hostsAt) >= hostsEvery {
		p.live, p.hosts = workersByHost(p.stats().Workers)
		p.hostsAt = time.Now()
	}
	return p.live, p.hosts
}

// workersByHost counts the live workers of ws, and says it by host.
func workersByHost(ws []engine.WorkerStats) (int, string) {
	n := 0
	by := map[string]int{}
	for _, w := range ws {
		if w.Live {
			n++
			by[report.HostOf(w)]++
		}
	}
	hosts := slices.Sorted(maps.Keys(by))
	parts := make([]string, len(hosts))
	for i, h := range hosts {
		parts[i] = fmt.Sprintf("%s %d", h, by[h])
	}
	if n == 0 {
		return 0, "workers 0"
	}
	return n, fmt.Sprintf("workers %d (%s)", n, strings.Join(parts, ", "))
}

// line is a plain progress line.
func (p *progress) line() string {
	p.mu.Lock()
	e := p.last
	p.mu.Unlock()
	c := e.Counts
	done := c[engine.Succeeded] + c[engine.Failed] + c[engine.Cancelled] + c[engine.Aborted] + c[engine.Skipped]
	return fmt.Sprintf("%d/%d jobs done, %s", done, e.Total(), p.status())
}

// stop ends the display, leaving the bar's last state on screen.
func (p *progress) stop() {
	if p.bars != nil {
		p.bar.SetTotal(-1, true)
		p.bars.Wait()
		return
	}
	close(p.stopPlain)
	<-p.plainDone
}

// commandOutput is where the output of the commands of a run goes
// (engine.WorkerOutput): above the progress bar while it is up, if that
// is where it would land (on the bar's terminal), else straight to out.
// The bar is session s's.
type commandOutput struct {
	s      *session
	out    io.Writer
	viaBar bool
}

// newCommandOutput returns where the commands' standard output and
// standard error go, for session s whose progress shows on stderr.
func newCommandOutput(s *session, stdout, stderr io.Writer) (outw, errw *commandOutput) {
	return &commandOutput{s: s, out: stdout, viaBar: sameFile(stdout, stderr)},
		&commandOutput{s: s, out: stderr, viaBar: true}
}

// Write writes whole lines, as the engine passes them on. The session
// sets its progress before the pool runs, which starts the goroutines
// that call Write, and never changes it then.
func (o *commandOutput) Write(b []byte) (int, error) {
	if p := o.s.prog; o.viaBar && p != nil && p.bars != nil {
		return p.Write(b)
	}
	return o.out.Write(b)
}
