package engine

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/internal/enginehost"
	"github.com/poolrun/poolrun/shm"
)

// The engine's half of internal/enginehost: what package cluster and the
// tests of other packages take from the engine, kept out of its API.

func init() {
	enginehost.Register(&enginehost.Engine[Option]{
		Joiner:             joiner,
		Fingerprint:        fingerprint,
		StartWorkerProcess: startWorkerProcess,
		Serve:              serveHosted,
		StartTimeout: func(d time.Duration) Option {
			positive("StartTimeout", d)
			return func(c *config) { c.startTimeout = d }
		},
		CancelGrace: func(d time.Duration) Option {
			positive("CancelGrace", d)
			return func(c *config) { c.grace = d }
		},
		SilenceLimit: func(d time.Duration) Option {
			if d < 100*time.Millisecond {
				panic(fmt.Sprintf("engine: SilenceLimit(%v): below 100ms", d))
			}
			return func(c *config) { c.silence = d }
		},
	})
}

func positive(option string, d time.Duration) {
	if d <= 0 {
		panic(fmt.Sprintf("engine: %s(%v): not positive", option, d))
	}
}

// joiner is enginehost.Engine.Joiner.
func joiner(f func(ctx context.Context, p enginehost.Pool)) Option {
	return func(c *config) { c.joiners = append(c.joiners, f) }
}

// hostPool is a running pool as a joiner sees it.
type hostPool struct{ p *Pool }

func (h hostPool) Admit(w enginehost.RemoteWorker) error { return h.p.admit(w) }
func (h hostPool) WindowCapacity() int                   { return h.p.cfg.capacity }

// serveHosted is enginehost.Engine.Serve: a worker in this process, with
// a cache of its own, over streams a transport carries.
func serveHosted(ctx context.Context, jobs io.Reader, replies io.Writer, control io.Reader, win *shm.Window, stdout, stderr io.Writer) error {
	wc, params, err := acceptPipe(jobs, replies, control)
	if err != nil {
		return err
	}
	if c, ok := jobs.(io.Closer); ok {
		stop := context.AfterFunc(ctx, func() { c.Close() })
		defer stop()
	}
	if stdout != nil && stderr != nil {
		o := &jobOutput{stdout: newLineWriter(stdout), stderr: newLineWriter(stderr)}
		ctx = context.WithValue(ctx, jobOutputKey{}, o)
		defer o.stderr.flush()
		defer o.stdout.flush()
	}
	if win != nil {
		ctx = context.WithValue(ctx, windowFileKey{}, win.File())
	}
	// Its own cache, as the pool's scheduler assumes of every worker; the
	// heap is this process's, shared with its other workers.
	cache := cachepool.New()
	err = serve(ctx, wc, shmReader{win}, cache, params, sharedHeap, new(atomic.Bool))
	if ctx.Err() == nil {
		return err
	}
	cache.Clear()
	return wc.bye(&byeInfo{stats: cache.Stats(), peakRSS: peakRSS()})
}
