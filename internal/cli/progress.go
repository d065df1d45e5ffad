package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/poolrun/poolrun/engine"
)

// progress shows a pool's progress on standard error: a live bar on a
// terminal, a plain line every few seconds otherwise.
type progress struct {
	w     io.Writer
	start time.Time

	mu   sync.Mutex
	last engine.Event // the latest event, with its counts

	// terminal
	bars *mpb.Progress
	bar  *mpb.Bar

	// plain
	stopPlain chan struct{}
	plainDone chan struct{}
}

// plainEvery is how often progress is printed off a terminal.
const plainEvery = 2 * time.Second

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func newProgress(ctx context.Context, w io.Writer) *progress {
	p := &progress{w: w, start: time.Now()}
	if isTerminal(w) {
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
	if p.bars != nil {
		fmt.Fprintf(p.bars, format, args...)
		return
	}
	fmt.Fprintf(p.w, format, args...)
}

// status is the text after the bar.
func (p *progress) status() string {
	p.mu.Lock()
	e := p.last
	p.mu.Unlock()
	c := e.Counts
	s := fmt.Sprintf("running %d  failed %d  cache %s  %s", c[engine.Running], c[engine.Failed]+c[engine.Aborted], humanBytes(e.CacheBytes), time.Since(p.start).Round(time.Second))
	if n := c[engine.Cancelled]; n > 0 {
		s += fmt.Sprintf("  cancelled %d", n)
	}
	return s
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
